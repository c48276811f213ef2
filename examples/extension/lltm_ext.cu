/* lltm_ext's CUDA kernels: the tutorial's lltm_cuda_forward_kernel and
 * lltm_cuda_backward_kernel over raw pointers, one thread per (batch row, state column).
 * lltm_ext.c computes the GEMMs with tg ops and calls these for the elementwise parts (only
 * when built with TG_EXTENSION_CUDA).
 *
 * They launch on tg's stream (tg_cuda_stream): tg queues its work on a non-blocking stream
 * of its own, which the default stream the tutorial launches on does not order with, so a
 * kernel there could read the gates before tg's GEMM wrote them, or tg's next op read the
 * outputs before the kernel wrote them. On tg's stream everything runs in order, and
 * nothing waits on the host. They launch through tg_cuda_launch (tg/cuda_ext.cuh), which is
 * the <<<>>> launch under nvcc and lets the same file run on tg's CPU emulation of CUDA,
 * where tg's tests run these kernels (tests/ext/test_jit_emu.c). */
#include <math.h>
#include <tg/cuda_ext.cuh>

#include "lltm_ext.h"

namespace {

template <typename scalar_t> __device__ __forceinline__ scalar_t sigmoid(scalar_t z) {
  return 1.0 / (1.0 + exp(-z));
}

template <typename scalar_t> __device__ __forceinline__ scalar_t d_sigmoid(scalar_t z) {
  const scalar_t s = sigmoid(z);
  return (1.0 - s) * s;
}

template <typename scalar_t> __device__ __forceinline__ scalar_t d_tanh(scalar_t z) {
  const scalar_t t = tanh(z);
  return 1 - (t * t);
}

template <typename scalar_t>
__device__ __forceinline__ scalar_t elu(scalar_t z, scalar_t alpha = 1.0) {
  return fmax(scalar_t(0.0), z) + fmin(scalar_t(0.0), alpha * (exp(z) - scalar_t(1.0)));
}

template <typename scalar_t>
__device__ __forceinline__ scalar_t d_elu(scalar_t z, scalar_t alpha = 1.0) {
  const scalar_t e = exp(z);
  const scalar_t d_relu = z < 0.0 ? 0.0 : 1.0;
  return d_relu + (((alpha * (e - scalar_t(1.0))) < 0.0) ? (alpha * e) : scalar_t(0.0));
}

template <typename scalar_t>
__global__ void
lltm_ext_forward_kernel(const scalar_t *__restrict__ gates, const scalar_t *__restrict__ old_cell,
                        scalar_t *__restrict__ new_h, scalar_t *__restrict__ new_cell,
                        scalar_t *__restrict__ input_gate, scalar_t *__restrict__ output_gate,
                        scalar_t *__restrict__ candidate_cell, size_t state_size) {
  const size_t column = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t index = blockIdx.y * state_size + column;
  const size_t gates_row = blockIdx.y * (state_size * 3);
  if (column < state_size) {
    input_gate[index] = sigmoid(gates[gates_row + column]);
    output_gate[index] = sigmoid(gates[gates_row + state_size + column]);
    candidate_cell[index] = elu(gates[gates_row + 2 * state_size + column]);
    new_cell[index] = old_cell[index] + candidate_cell[index] * input_gate[index];
    new_h[index] = tanh(new_cell[index]) * output_gate[index];
  }
}

template <typename scalar_t>
__global__ void lltm_ext_backward_kernel(
    scalar_t *__restrict__ d_old_cell, scalar_t *__restrict__ d_gates,
    const scalar_t *__restrict__ grad_h, const scalar_t *__restrict__ grad_cell,
    const scalar_t *__restrict__ new_cell, const scalar_t *__restrict__ input_gate,
    const scalar_t *__restrict__ output_gate, const scalar_t *__restrict__ candidate_cell,
    const scalar_t *__restrict__ gate_weights, size_t state_size) {
  const size_t column = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t index = blockIdx.y * state_size + column;
  const size_t gates_row = blockIdx.y * (state_size * 3);
  if (column < state_size) {
    const scalar_t d_output_gate = tanh(new_cell[index]) * grad_h[index];
    const scalar_t d_tanh_new_cell = output_gate[index] * grad_h[index];
    const scalar_t d_new_cell = d_tanh(new_cell[index]) * d_tanh_new_cell + grad_cell[index];
    d_old_cell[index] = d_new_cell;
    const scalar_t d_candidate_cell = input_gate[index] * d_new_cell;
    const scalar_t d_input_gate = candidate_cell[index] * d_new_cell;
    d_gates[gates_row + column] = d_input_gate * d_sigmoid(gate_weights[gates_row + column]);
    d_gates[gates_row + state_size + column] =
        d_output_gate * d_sigmoid(gate_weights[gates_row + state_size + column]);
    d_gates[gates_row + 2 * state_size + column] =
        d_candidate_cell * d_elu(gate_weights[gates_row + 2 * state_size + column]);
  }
}

/* A CUDA runtime error as a tg error naming the step. */
tg_status cuda_check(const char *what, cudaError_t err) {
  if (err == cudaSuccess) return TG_OK;
  return tg_set_error(TG_ERR_DEVICE, "lltm_ext: %s: %s", what, cudaGetErrorString(err));
}

/* The stream to launch on: tg's, for the tensor's device (made current). */
tg_status stream_of(const tg_tensor *t, cudaStream_t *stream) {
  const int device = tg_tensor_device(t).index;
  void *s = NULL;
  tg_status st = cuda_check("cudaSetDevice", cudaSetDevice(device));
  if (st == TG_OK) st = tg_cuda_stream(device, &s);
  *stream = (cudaStream_t)s;
  return st;
}

const int threads = 1024;

dim3 blocks_for(int64_t batch, int64_t state) {
  return dim3((unsigned)((state + threads - 1) / threads), (unsigned)batch);
}

} // namespace

extern "C" tg_status lltm_ext_cuda_forward_pointwise(const tg_tensor *gate_weights,
                                                     const tg_tensor *old_cell, tg_tensor *new_h,
                                                     tg_tensor *new_cell, tg_tensor *input_gate,
                                                     tg_tensor *output_gate,
                                                     tg_tensor *candidate_cell) {
  const int64_t batch = tg_size(old_cell, 0), state = tg_size(old_cell, 1);
  if (batch == 0 || state == 0) return TG_OK;
  cudaStream_t stream;
  tg_status st = stream_of(old_cell, &stream);
  if (st != TG_OK) return st;
  TG_DISPATCH_FLOATING_TYPES(tg_tensor_dtype(old_cell), "lltm_ext", {
    st = cuda_check(
        "lltm_ext_forward_kernel launch",
        tg_cuda_launch(lltm_ext_forward_kernel<scalar_t>, blocks_for(batch, state), dim3(threads),
                       stream, (const scalar_t *)tg_data_ptr(gate_weights),
                       (const scalar_t *)tg_data_ptr(old_cell), (scalar_t *)tg_data_ptr(new_h),
                       (scalar_t *)tg_data_ptr(new_cell), (scalar_t *)tg_data_ptr(input_gate),
                       (scalar_t *)tg_data_ptr(output_gate),
                       (scalar_t *)tg_data_ptr(candidate_cell), (size_t)state));
  });
  return st;
}

extern "C" tg_status lltm_ext_cuda_backward_pointwise(
    const tg_tensor *grad_h, const tg_tensor *grad_cell, const tg_tensor *new_cell,
    const tg_tensor *input_gate, const tg_tensor *output_gate, const tg_tensor *candidate_cell,
    const tg_tensor *gate_weights, tg_tensor *d_old_cell, tg_tensor *d_gates) {
  const int64_t batch = tg_size(new_cell, 0), state = tg_size(new_cell, 1);
  if (batch == 0 || state == 0) return TG_OK;
  cudaStream_t stream;
  tg_status st = stream_of(new_cell, &stream);
  if (st != TG_OK) return st;
  TG_DISPATCH_FLOATING_TYPES(tg_tensor_dtype(new_cell), "lltm_ext", {
    st = cuda_check(
        "lltm_ext_backward_kernel launch",
        tg_cuda_launch(
            lltm_ext_backward_kernel<scalar_t>, blocks_for(batch, state), dim3(threads), stream,
            (scalar_t *)tg_data_ptr(d_old_cell), (scalar_t *)tg_data_ptr(d_gates),
            (const scalar_t *)tg_data_ptr(grad_h), (const scalar_t *)tg_data_ptr(grad_cell),
            (const scalar_t *)tg_data_ptr(new_cell), (const scalar_t *)tg_data_ptr(input_gate),
            (const scalar_t *)tg_data_ptr(output_gate),
            (const scalar_t *)tg_data_ptr(candidate_cell),
            (const scalar_t *)tg_data_ptr(gate_weights), (size_t)state));
  });
  return st;
}
