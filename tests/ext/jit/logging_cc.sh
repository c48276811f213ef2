#!/bin/sh
# The C compiler of tests/ext/test_jit.c: appends each invocation to $TG_JIT_TEST_LOG (so a
# test can count compiler runs), sleeps $TG_JIT_TEST_DELAY seconds if set (so that two
# builds overlap), then runs cc.
printf '%s\n' "$*" >>"$TG_JIT_TEST_LOG"
if [ -n "${TG_JIT_TEST_DELAY:-}" ]; then sleep "$TG_JIT_TEST_DELAY"; fi
exec cc "$@"
