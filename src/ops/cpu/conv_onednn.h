/* The CPU's own convolution, oneDNN's where found (conv_onednn.c): whether it runs, which
 * version, and a switch for the tests. The kernels themselves are the conv2d.* lines of
 * src/ops/def/conv.def. */
#ifndef TG_CONV_ONEDNN_H
#define TG_CONV_ONEDNN_H

#include <stdbool.h>
#include <stdint.h>

/* Whether oneDNN is loaded (once, on first ask) and not switched off. */
bool tg__cpu_conv_onednn_available(void);
/* "2.6.3", or NULL when not available. */
const char *tg__cpu_conv_onednn_version(void);
/* Tests: false makes every convolution take the generic path, true restores the default. */
void tg__cpu_conv_onednn_enable(bool on);
/* Tests: how many kernel calls oneDNN has completed in this process. */
int64_t tg__cpu_conv_onednn_runs(void);

#endif
