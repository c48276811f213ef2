# What the train_charlm script tests share (tests/extra/charlm.cmake and charlm_dist.cmake,
# each run with `cmake -P`): the final losses a run prints, and the check that a resumed run
# ends exactly where the uninterrupted one does. Included, never run on its own.

# The number after `label` ("test accuracy", ...) in a run's output, into out.
function(run_value text label out)
  if(NOT text MATCHES "${label} ([-+.0-9eE]+|nan|inf)")
    message(FATAL_ERROR "no '${label}' in:\n${text}")
  endif()
  set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

# The number after "final <what> loss" (train or val) in a run's output, into out.
function(charlm_final text what out)
  run_value("${text}" "final ${what} loss" value)
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

# Both final losses of the resumed run equal the uninterrupted run's, as strings (%.17g):
# bit for bit. prefix starts the messages ("np 2, "), at_step is where the run resumed.
function(charlm_expect_resumed_equal straight resumed prefix at_step)
  foreach(what train val)
    charlm_final("${straight}" ${what} a)
    charlm_final("${resumed}" ${what} b)
    if(NOT a STREQUAL b)
      message(FATAL_ERROR
              "${prefix}final ${what} loss: ${b} resumed at step ${at_step}, ${a} uninterrupted")
    endif()
    message(STATUS "${prefix}final ${what} loss ${a}: resumed == uninterrupted")
  endforeach()
endfunction()
