/* A CUDA JIT test extension (tests/ext/test_jit.c, where tg has real CUDA): jit_twice(x) = 2x,
 * a kernel on CUDA (F64, contiguous), tg ops on the CPU and in backward. */
#include <tg/cuda_ext.cuh>
#include <tg/extension.h>

#ifndef TG_EXTENSION_CUDA
#error "the JIT defines TG_EXTENSION_CUDA=1 when it compiles .cu sources"
#endif

__global__ void twice_kernel(const double *x, double *y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0 * x[i];
}

static tg_status twice_cpu(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  out[0] = tg_mul_scalar(in[0], 2.0);
  return out[0] ? TG_OK : tg_last_error();
}

static tg_status twice_cuda(tg_ctx *ctx, const tg_tensor *const *in, tg_tensor **out) {
  (void)ctx;
  tg_tensor *x = tg_contiguous(in[0]);
  if (!x) return tg_last_error();
  if (tg_tensor_dtype(x) != TG_F64)
    return tg_set_error(TG_ERR_DTYPE, "jit_twice: the CUDA kernel takes F64");
  out[0] = tg_empty_like(x);
  if (!out[0]) return tg_last_error();
  long long n = tg_numel(x);
  /* On tg's stream, so the kernel runs after the ops that made x and before those that
   * read the output. */
  void *stream = NULL;
  tg_status st = tg_cuda_stream(tg_tensor_device(x).index, &stream);
  if (st) return st;
  cudaError_t err = n == 0
                        ? cudaSuccess
                        : tg_cuda_launch(twice_kernel, dim3((unsigned)((n + 255) / 256)), dim3(256),
                                         (cudaStream_t)stream, (const double *)tg_data_ptr(x),
                                         (double *)tg_data_ptr(out[0]), n);
  if (err != cudaSuccess)
    return tg_set_error(TG_ERR_DEVICE, "jit_twice: %s", cudaGetErrorString(err));
  return TG_OK;
}

static tg_status twice_backward(tg_ctx *ctx, const tg_tensor *const *g, tg_tensor **gin) {
  (void)ctx;
  gin[0] = tg_mul_scalar(g[0], 2.0);
  return gin[0] ? TG_OK : tg_last_error();
}

TG_EXTENSION(api) {
  tg_op_desc twice = {};
  twice.name = "jit_twice";
  twice.n_inputs = 1;
  twice.n_outputs = 1;
  twice.forward[TG_CPU] = twice_cpu;
  twice.forward[TG_CUDA] = twice_cuda;
  twice.backward = twice_backward;
  return api->register_op(api, &twice);
}
