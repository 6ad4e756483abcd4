// The headers nearly every test includes, precompiled once for all the GoogleTest binaries
// (cmake/PrecompiledHeaders.cmake).
#pragma once

#include "PchCommon.h"

#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "ir/Builder.h"
