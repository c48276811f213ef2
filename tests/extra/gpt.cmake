# examples/train_gpt.c in the suite: a short run must learn (its --check: the validation loss
# ends a nat below the first training loss), a run resumed from a checkpoint must end exactly
# where the uninterrupted run ends, its command line refuses bad values, its llm.c writers
# read back (gpt_llmc_io_test), with torch its losses are PyTorch's (gpt_torch), and on the
# CUDA device (emulated, and on a GPU where there is one) it trains as on the CPU
# (gpt_cuda_matches_cpu_*).
#
# The same file is the resume test's script: `cmake -DPROG=... -DDIR=... -P gpt.cmake` runs
# the program three times (40 steps; 20 with a checkpoint; --resume to 40) and compares the
# final losses, printed with %.17g, as strings (tests/charlm_runs.cmake).

# Small sizes: a few seconds per run on 2 cores (Release).
set(GPT_SMALL --layers 2 --heads 2 --channels 64 --seq 32 --batch 8 --lr 3e-3 --quiet)
include(${CMAKE_CURRENT_LIST_DIR}/device_runs.cmake)

if(CMAKE_SCRIPT_MODE_FILE) # ---- the resume test ----
  include(${CMAKE_CURRENT_LIST_DIR}/../charlm_runs.cmake)
  file(REMOVE_RECURSE ${DIR})
  file(MAKE_DIRECTORY ${DIR})
  function(gpt_run out)
    execute_process(COMMAND ${PROG} ${GPT_SMALL} ${ARGN} OUTPUT_VARIABLE text
                    ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "train_gpt ${ARGN}: exit ${rc}\n${text}${err}")
    endif()
    set(${out} "${text}" PARENT_SCOPE)
  endfunction()
  # One thread, as charlm.cmake: a GEMM on one thread rounds differently from two.
  set(one --threads 1)
  if(DEVICE) # ---- --device ${DEVICE} trains as the CPU does ----
    # F64, each attention: the device's kernels and GEMMs round differently from the CPU's,
    # so 12 significant digits after 5 steps (they agreed to 15-16 on the emulation). Then a
    # run resumed on the device from a checkpoint it wrote ends bit for bit where the
    # uninterrupted device run ends (the checkpoint round trip through the host).
    tg_skip_without_gpu(${GPT_SMALL} --steps 1)
    set(tiny --layers 1 --channels 32 --seq 16 --batch 4 --f64 --val-windows 8 ${one})
    set(small --steps 5 ${tiny})
    foreach(impl fused composed)
      gpt_run(cpu ${small} --${impl})
      gpt_run(dev ${small} --${impl} --device ${DEVICE})
      tg_expect_device_memory("${dev}")
      foreach(what train val)
        charlm_final("${cpu}" ${what} a)
        charlm_final("${dev}" ${what} b)
        tg_expect_same_start("${a}" "${b}" 13 "${impl}: final ${what} loss, cpu and ${DEVICE}")
      endforeach()
    endforeach()
    set(dev --device ${DEVICE} ${tiny})
    gpt_run(straight --steps 6 ${dev})
    gpt_run(first_half --steps 3 --checkpoint ${DIR}/gpt.ckpt ${dev})
    gpt_run(resumed --steps 6 --checkpoint ${DIR}/gpt.ckpt --resume ${dev})
    charlm_expect_resumed_equal("${straight}" "${resumed}" "${DEVICE}: " 3)
    file(REMOVE_RECURSE ${DIR})
    return()
  endif()
  if(FUSED_VS_COMPOSED) # ---- both attentions train alike from one seed ----
    # The two compute the same function: their losses differ by F32 rounding carried through
    # training, so 20 steps and 5 digits (as cnn.cmake's fused conv+BN check).
    foreach(impl fused composed)
      gpt_run(${impl} --steps 20 --${impl} ${one})
      foreach(what train val)
        charlm_final("${${impl}}" ${what} value)
        string(SUBSTRING "${value}" 0 6 ${impl}_${what})
      endforeach()
    endforeach()
    foreach(what train val)
      if(NOT fused_${what} STREQUAL composed_${what})
        message(FATAL_ERROR "final ${what} loss: fused ${fused_${what}}, composed ${composed_${what}}")
      endif()
      message(STATUS "final ${what} loss: fused ${fused_${what}}, composed ${composed_${what}}")
    endforeach()
    file(REMOVE_RECURSE ${DIR})
    return()
  endif()
  gpt_run(straight --steps 40 ${one})
  gpt_run(first_half --steps 20 --checkpoint ${DIR}/gpt.ckpt --checkpoint-every 10 ${one})
  gpt_run(resumed --steps 40 --checkpoint ${DIR}/gpt.ckpt --resume ${one})
  charlm_expect_resumed_equal("${straight}" "${resumed}" "" 20)
  file(REMOVE_RECURSE ${DIR})
  return()
endif()

if(NOT TARGET train_gpt)
  return() # examples not built (TG_BUILD_EXAMPLES=OFF)
endif()

# Learns: 60 steps on 2 threads, with each attention.
foreach(impl fused composed)
  add_test(NAME gpt_learns_${impl}
           COMMAND train_gpt --steps 60 --threads 2 --check --${impl} ${GPT_SMALL})
  set_tests_properties(gpt_learns_${impl} PROPERTIES PASS_REGULAR_EXPRESSION "check passed"
                                                     TIMEOUT 120)
  tg_test_labels(gpt_learns_${impl} LABELS slow)
endforeach()

add_test(NAME gpt_resume_bit_identical
         COMMAND ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:train_gpt>
                 -DDIR=${CMAKE_CURRENT_BINARY_DIR}/gpt_resume -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(gpt_resume_bit_identical PROPERTIES TIMEOUT 120)
tg_test_labels(gpt_resume_bit_identical LABELS slow)

add_test(NAME gpt_fused_matches_composed
         COMMAND ${CMAKE_COMMAND} -DPROG=$<TARGET_FILE:train_gpt> -DFUSED_VS_COMPOSED=ON
                 -DDIR=${CMAKE_CURRENT_BINARY_DIR}/gpt_fused -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(gpt_fused_matches_composed PROPERTIES TIMEOUT 120)
tg_test_labels(gpt_fused_matches_composed LABELS slow)

# On the CUDA device: the emulation (tests/cuda: the kernels run on the CPU) and, where the
# real module is built, a GPU (skipped where the machine has none).
tg_device_run_tests(gpt_cuda_matches_cpu train_gpt ${CMAKE_CURRENT_LIST_FILE})

# Sampling, the CSV and the F64 path run through (a few steps; the text is not checked).
add_test(NAME gpt_sample_and_csv
         COMMAND train_gpt --steps 3 --f64 --sample 20 --csv ${CMAKE_CURRENT_BINARY_DIR}/gpt.csv
                 ${GPT_SMALL})
set_tests_properties(gpt_sample_and_csv PROPERTIES
  PASS_REGULAR_EXPRESSION "--- sample \\(20 tokens, temperature 0.8\\) ---\nThe .*--- end of sample ---")
tg_test_labels(gpt_sample_and_csv LABELS fast)

# Random token ids over a vocabulary past a byte's (the bench's GPT-2 setting, small).
add_test(NAME gpt_random_tokens
         COMMAND train_gpt --steps 2 --vocab 1000 --random-tokens 5000 --sample 3 ${GPT_SMALL})
set_tests_properties(gpt_random_tokens PROPERTIES
  PASS_REGULAR_EXPRESSION "final val loss [.0-9]+.*--- sample \\(3 tokens")
tg_test_labels(gpt_random_tokens LABELS fast)

# --profile: the op table after the run, from the second step on (3 rows and the rest counted).
add_test(NAME gpt_profile COMMAND train_gpt --steps 3 --random-tokens 5000 --profile 3 ${GPT_SMALL})
set_tests_properties(gpt_profile PROPERTIES
  PASS_REGULAR_EXPRESSION
  "ops by self time, steps 2-3 \\(their validation passes included\\):\nop +calls +self ms[^\n]*\n[^\n]+\n[^\n]+\n[^\n]+\n\\([0-9]+ more rows\\)\nall ops \\(self\\) +[.0-9]+")
tg_test_labels(gpt_profile LABELS fast)
# The table cannot be written (stdout on a full device): exit 1, naming the call.
add_test(NAME gpt_profile_unwritable
         COMMAND sh -c "\"$0\" \"$@\" 2>&1 >/dev/full; echo \"exit $?\""
                 $<TARGET_FILE:train_gpt> --steps 2 --random-tokens 5000 --profile 3 ${GPT_SMALL})
set_tests_properties(gpt_profile_unwritable PROPERTIES PASS_REGULAR_EXPRESSION
  "train_gpt: --profile: tg_profile_print: writing the table failed: No space left on device \\(TG_ERR_IO\\)\nexit 1")
tg_test_labels(gpt_profile_unwritable LABELS fast)
# TG_PROFILE=N: any program's whole run, printed on stderr at exit; a bad value is refused
# with a message and the program runs unprofiled.
add_test(NAME gpt_profile_env
         COMMAND ${CMAKE_COMMAND} -E env TG_PROFILE=2 $<TARGET_FILE:train_gpt> --steps 2
                 --random-tokens 5000 ${GPT_SMALL})
set_tests_properties(gpt_profile_env PROPERTIES PASS_REGULAR_EXPRESSION
  "tg: op profile \\(TG_PROFILE\\), by self time:\nop +calls +self ms[^\n]*\n[^\n]+\n[^\n]+\n\\([0-9]+ more rows\\)")
tg_test_labels(gpt_profile_env LABELS fast)
add_test(NAME gpt_profile_env_bad
         COMMAND ${CMAKE_COMMAND} -E env TG_PROFILE=lots $<TARGET_FILE:train_gpt> --steps 1
                 --random-tokens 5000 ${GPT_SMALL})
set_tests_properties(gpt_profile_env_bad PROPERTIES PASS_REGULAR_EXPRESSION
  "tg: TG_PROFILE='lots' is not N or N,sync \\(the rows to print at exit, 0 for all\\): not profiling.*final val loss"
  FAIL_REGULAR_EXPRESSION "op profile")
tg_test_labels(gpt_profile_env_bad LABELS fast)

# Without gnuplot on PATH the plot is skipped with a note, and the run still succeeds.
add_test(NAME gpt_plot_without_gnuplot
         COMMAND ${CMAKE_COMMAND} -E env PATH=/nonexistent $<TARGET_FILE:train_gpt> --steps 2
                 --plot ${CMAKE_CURRENT_BINARY_DIR}/gpt.png ${GPT_SMALL})
set_tests_properties(gpt_plot_without_gnuplot PROPERTIES
  PASS_REGULAR_EXPRESSION "note: gnuplot is not on PATH, so no plot")
tg_test_labels(gpt_plot_without_gnuplot LABELS fast)

# Bad values: exit 2 and a message naming the option and the value; a check that cannot pass
# and a missing text: exit 1.
function(gpt_cli_test name regex)
  add_test(NAME gpt_cli_${name}
           COMMAND sh -c "out=$(\"$0\" \"$@\" 2>&1); echo \"exit $?: $out\""
                   $<TARGET_FILE:train_gpt> ${ARGN})
  set_tests_properties(gpt_cli_${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}")
  tg_test_labels(gpt_cli_${name} LABELS fast)
endfunction()
gpt_cli_test(help "^exit 0: usage: train_gpt" --help)
gpt_cli_test(layers_word "^exit 2: train_gpt: --layers: 'abc' is not an integer" --layers abc)
gpt_cli_test(heads_zero "^exit 2: train_gpt: --heads: '0' is out of range" --heads 0)
gpt_cli_test(channels_heads
             "^exit 2: train_gpt: --channels 100 is not a multiple of --heads 3" --channels 100
             --heads 3)
gpt_cli_test(vocab_small_text "^exit 2: train_gpt: --vocab 100: a text's tokens are bytes"
             --vocab 100)
gpt_cli_test(text_and_random "^exit 2: train_gpt: give --text or --random-tokens, not both"
             --text /etc/hostname --random-tokens 100)
gpt_cli_test(lr_zero "^exit 2: train_gpt: --lr: '0' is out of range" --lr 0)
gpt_cli_test(profile_zero "^exit 2: train_gpt: --profile: '0' is out of range" --profile 0)
gpt_cli_test(temperature_word "^exit 2: train_gpt: --temperature: 'hot' is not a number"
             --temperature hot)
gpt_cli_test(resume_alone "^exit 2: train_gpt: --resume and --checkpoint-every need" --resume)
gpt_cli_test(two_impls "^exit 2: train_gpt: give one of --fused, --composed" --fused --composed)
gpt_cli_test(device_unknown "^exit 2: train_gpt: --device tpu: tg_device_parse: 'tpu' names no device type"
             --device tpu)
gpt_cli_test(device_missing "^exit 1: train_gpt: --device cuda:7: .*(TG_ERR_DEVICE)" --device cuda:7
             --steps 1)
gpt_cli_test(unknown_option "^exit 2: .*unrecognized option '--nope'" --nope)
gpt_cli_test(missing_text "^exit 1: train_gpt: cannot open '/nonexistent/text'" --text
             /nonexistent/text)
gpt_cli_test(short_text "^exit 1: train_gpt: [0-9]+ tokens are too few for --seq 4096"
             --seq 4096)
gpt_cli_test(expect_below_fails
             "^exit 1: .*CHECK FAILED: validation loss [.0-9]+ is not below 0.01" --steps 2
             --expect-below 0.01 ${GPT_SMALL})
gpt_cli_test(llmc_dir_missing
             "^exit 1: train_gpt: --llmc-dir: gpt_llmc_write_model: cannot write '/nonexistent/model.bin'"
             --steps 1 --llmc-dir /nonexistent ${GPT_SMALL})
gpt_cli_test(llmc_big_vocab
             "^exit 1: train_gpt: --llmc-dir: gpt_llmc_write_tokens: token [0-9]+ is [0-9]+: llm.c stores uint16"
             --steps 1 --vocab 100000 --random-tokens 3000 --llmc-dir ${CMAKE_CURRENT_BINARY_DIR}
             ${GPT_SMALL})

# The llm.c writers against a reader of the formats (tests/extra/gpt_llmc_io_test.c).
add_executable(gpt_llmc_io_test ${CMAKE_CURRENT_LIST_DIR}/gpt_llmc_io_test.c
                                ${PROJECT_SOURCE_DIR}/examples/gpt/gpt_model.c
                                ${PROJECT_SOURCE_DIR}/examples/gpt/gpt_ops.c
                                ${PROJECT_SOURCE_DIR}/examples/gpt/llmc_io.c)
target_compile_options(gpt_llmc_io_test PRIVATE ${TG_WARNINGS})
target_include_directories(gpt_llmc_io_test PRIVATE ${PROJECT_SOURCE_DIR}/examples)
target_link_libraries(gpt_llmc_io_test PRIVATE tg)
add_test(NAME gpt_llmc_io COMMAND gpt_llmc_io_test WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
tg_test_labels(gpt_llmc_io LABELS fast)

# train_gpt against the same model in PyTorch: same initial weights, same batches, 10 AdamW
# steps in F64 (1e-10) and F32 (1e-5) (bench/gpt_torch.py agree). Run by the Python that has
# torch, TG_TORCH_PYTHON as for tests/nn's cnn_torch (the environment variable wins over the
# cache); skips (77) visibly without torch and safetensors.
set(_tg_gpt_torch_python ${TG_TORCH_PYTHON})
if(DEFINED ENV{TG_TORCH_PYTHON} AND NOT "$ENV{TG_TORCH_PYTHON}" STREQUAL "")
  set(_tg_gpt_torch_python "$ENV{TG_TORCH_PYTHON}")
endif()
if(_tg_gpt_torch_python AND EXISTS ${_tg_gpt_torch_python})
  add_test(NAME gpt_torch
           COMMAND ${_tg_gpt_torch_python} ${PROJECT_SOURCE_DIR}/bench/gpt_torch.py agree
                   $<TARGET_FILE:train_gpt> ${CMAKE_CURRENT_BINARY_DIR}/gpt_torch)
else()
  add_test(NAME gpt_torch
           COMMAND sh -c "echo 'SKIP: ${_tg_gpt_torch_python} not found (TG_TORCH_PYTHON)'; exit 77")
endif()
set_tests_properties(gpt_torch PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
tg_test_labels(gpt_torch LABELS slow python)
