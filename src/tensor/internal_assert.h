/* The second tier of failure: bugs inside tg (docs/design.md, "Errors").
 *
 * A caller's mistake (a NULL tensor, mismatched sizes, a bad dtype) is a recoverable
 * tg_status with a message, raised through the checks of tensor/check.h. An invariant that
 * tg itself establishes (a dtype every entry point already validated, sizes computed from
 * checked ones, the kind a switch was built for) is asserted with TG_INTERNAL_ASSERT: when
 * it fails, tg is wrong, no caller can recover, and continuing would compute garbage.
 *
 * On in Debug, sanitizer and fuzzing builds (CMake: TG_INTERNAL_ASSERTS, AUTO like the
 * lifetime checker), where a failure prints "<file>:<line>: internal assertion failed:
 * <condition>: this is a bug in tg" and aborts. Off in Release, where the condition is not
 * evaluated (it must have no side effects) and nothing is assumed from it. Never use it
 * for what a caller can get wrong. */
#ifndef TG_INTERNAL_ASSERT_H
#define TG_INTERNAL_ASSERT_H

#ifndef TG_INTERNAL_ASSERTS
#define TG_INTERNAL_ASSERTS 0
#endif

#ifdef __cplusplus
extern "C" {
#endif
/* Prints the report to stderr and aborts (internal_assert.c). */
__attribute__((noreturn)) void tg__internal_assert_fail(const char *file, int line,
                                                        const char *condition);
#ifdef __cplusplus
}
#endif

#if TG_INTERNAL_ASSERTS
#define TG_INTERNAL_ASSERT(cond)                                                                   \
  ((cond) ? (void)0 : tg__internal_assert_fail(__FILE__, __LINE__, #cond))
#else
/* Not evaluated; sizeof keeps the condition compiled, so it cannot rot, and its variables
 * used. */
#define TG_INTERNAL_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif
