# CUDA for tg. Sets TG_DEVICE_SOURCES / TG_DEVICE_LIBS for the main library:
#  - without CUDA: src/tensor/cuda_stub.c;
#  - with CUDA (TG_CUDA=ON, or AUTO and nvcc + cuBLAS found): the .cu files under src/ops/cuda.
# Placeholder until the CUDA backend lands: always the stub.
set(TG_DEVICE_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/src/tensor/cuda_stub.c)
set(TG_DEVICE_LIBS "")
set(TG_HAVE_CUDA OFF)
if(TG_CUDA STREQUAL "ON")
  message(FATAL_ERROR "TG_CUDA=ON but the CUDA backend is not built yet")
endif()
