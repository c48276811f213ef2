/* Marks functions shared by CPU loops and CUDA kernels (the emulation build is plain C++). */
#ifndef TG_HOSTDEVICE_H
#define TG_HOSTDEVICE_H
#ifdef __CUDACC__
#define TG_HOST_DEVICE __host__ __device__
#else
#define TG_HOST_DEVICE
#endif
#endif
