/* What the CPU can execute, read with cpuid: the instruction sets BLIS's kernel sets need,
 * checked against what the operating system saves on a context switch (XGETBV). */
#include "ops/cpu/cpu_features.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static bool bit(unsigned reg, int n) { return (reg >> n) & 1u; }

static unsigned long long xgetbv0(void) {
  unsigned eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return ((unsigned long long)edx << 32) | eax;
}

tg_cpu_features tg_cpu_features_read(void) {
  tg_cpu_features f;
  memset(&f, 0, sizeof f);
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  const unsigned max_leaf = a;
  memcpy(f.vendor, &b, 4);
  memcpy(f.vendor + 4, &d, 4);
  memcpy(f.vendor + 8, &c, 4);
  f.vendor[12] = '\0';

  __get_cpuid(1, &a, &b, &c, &d);
  const unsigned base_family = (a >> 8) & 0xf, ext_family = (a >> 20) & 0xff;
  f.family = (int)(base_family == 0xf ? base_family + ext_family : base_family);
  f.model = (int)(((a >> 4) & 0xf) | (base_family >= 0x6 ? ((a >> 16) & 0xf) << 4 : 0));
  f.stepping = (int)(a & 0xf);
  f.sse3 = bit(c, 0);
  f.ssse3 = bit(c, 9);
  f.sse41 = bit(c, 19);
  /* AVX state (and AVX-512 state) must be enabled by the OS, not only present. */
  const bool osxsave = bit(c, 27);
  const unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm_state = (xcr0 & 0x6) == 0x6, zmm_state = (xcr0 & 0xe6) == 0xe6;
  f.avx = bit(c, 28) && ymm_state;
  f.fma3 = bit(c, 12) && f.avx;

  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = bit(b, 5) && f.avx;
    f.avx512f = bit(b, 16) && zmm_state;
    f.avx512dq = bit(b, 17) && f.avx512f;
    f.avx512pf = bit(b, 26) && f.avx512f;
    f.avx512er = bit(b, 27) && f.avx512f;
    f.avx512bw = bit(b, 30) && f.avx512f;
    f.avx512vl = bit(b, 31) && f.avx512f;
  }
  const unsigned max_ext = __get_cpuid(0x80000000, &a, &b, &c, &d) ? a : 0;
  if (max_ext >= 0x80000004) {
    for (unsigned leaf = 0; leaf < 3; leaf++) { /* 48 bytes: 3 leaves of 4 registers */
      unsigned regs[4];
      __get_cpuid(0x80000002 + leaf, &regs[0], &regs[1], &regs[2], &regs[3]);
      memcpy(f.brand + 16 * leaf, regs, sizeof regs);
    }
    f.brand[48] = '\0';
  }
  if (max_ext >= 0x80000001) {
    __get_cpuid(0x80000001, &a, &b, &c, &d);
    f.fma4 = bit(c, 16) && f.avx;
    f.xop = bit(c, 11) && f.avx;
  }
  return f;
}

#else

tg_cpu_features tg_cpu_features_read(void) {
  tg_cpu_features f;
  memset(&f, 0, sizeof f);
  return f;
}

#endif
