# Fails when tests/parity/refs.txt was not written by the current gen_refs.py: its header
# records the generator's SHA-256 (cmake -DDIR=tests/parity -P check_refs.cmake; no torch).
file(SHA256 ${DIR}/gen_refs.py want)
file(STRINGS ${DIR}/refs.txt header REGEX "^H " LIMIT_COUNT 1)
if(NOT header MATCHES "gen_sha256=${want}")
  message(FATAL_ERROR "tests/parity/refs.txt is stale: its header (${header}) does not name "
                      "gen_refs.py's sha256 ${want}; rerun tests/parity/gen_refs.py with torch")
endif()
message(STATUS "refs.txt matches gen_refs.py (${want})")
