/* tg — what the shared library exports.
 *
 * libtg is compiled with hidden visibility by default (-fvisibility=hidden), so only what
 * the public headers declare leaves libtg.so: every header in include/tg/ wraps its
 * declarations, after its own #includes, in TG_API_BEGIN ... TG_API_END. A function keeps
 * the visibility of its first declaration, so the .c file that defines it needs no
 * annotation; internal functions (tg__*, tg_cpu_*, tg_cuda_* of the backends) stay inside
 * the library. tests/check_exports.sh checks libtg.so against these headers. */
#ifndef TG_EXPORT_H
#define TG_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define TG_API_BEGIN _Pragma("GCC visibility push(default)")
#define TG_API_END _Pragma("GCC visibility pop")
#else
#define TG_API_BEGIN
#define TG_API_END
#endif

#endif
