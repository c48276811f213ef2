/* The CPU backend: every primitive of backend.h, implemented in src/ops/cpu/cpu_*.c. */
#include "ops/cpu/cpu_internal.h"
#include "ops/lltm_internal.h"

const tg_backend tg_cpu_backend = {
    .name = "cpu",
    .fill = tg_cpu_fill,
    .copy = tg_cpu_copy,
    .unary = tg_cpu_unary,
    .binary = tg_cpu_binary,
    .sum_dim = tg_cpu_sum_dim,
    .max_dim = tg_cpu_max_dim,
    .gemm = tg_cpu_gemm,
    .gather_rows = tg_cpu_gather_rows,
    .scatter_add_rows = tg_cpu_scatter_add_rows,
    .uniform = tg_cpu_uniform,
    .normal = tg_cpu_normal,
    .lltm_forward_pointwise = tg_cpu_lltm_forward_pointwise,
    .lltm_backward_pointwise = tg_cpu_lltm_backward_pointwise,
};
