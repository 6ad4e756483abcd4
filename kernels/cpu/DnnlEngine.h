//===- DnnlEngine.h - The process's oneDNN CPU engine -------------*- C++ -*-===//
//
// One engine per process, made on first use after the ISA cap of
// kernels/cpu/CpuIsa.h has reached oneDNN (the cap must come before oneDNN's
// first primitive). CpuBackend hands it to the kernels; DnnlCompat.h makes
// its primitive descriptors on it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace graphc {

const dnnl::engine &cpuEngine();

} // namespace graphc
