//===- CommandLine.h - Parsing and ending both tools' command lines -*- C++ -*-===//
//
// CLI11 parses the command lines of graphc and graphrun. What it lets
// through is refused here, before any value is used:
//
//  - a whole-number option takes a decimal number within its type's range.
//    CLI11 alone reads "0x10" as 16 and "010" as 8, gives an unsigned option
//    2^64-1 for "-1", and saturates "18446744073709551616" (--seed) or
//    "99999999999999999999" (--steps) to the largest value instead of
//    refusing them;
//  - a problem with the command line is one "TOOL: error: ..." line and exit
//    status 1, like every other error; --help prints the help and exits 0.
//
// At the end, the standard output is flushed and checked: `graphc print >
// /dev/full` is one error line and exit 1, not a report of success (nor
// LLVM's fatal error when the stream is destroyed).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"

#include <CLI/CLI.hpp>

#include <optional>

namespace graphc {

/// Parses `argv` into `app` (options and subcommands already added). Returns
/// the status to exit with when the tool should stop here (help, or an error
/// already printed as one line), or nullopt to go on.
std::optional<int> parseCommandLine(CLI::App &app, int argc, char **argv, llvm::StringRef tool);

/// The status to exit with: `status`, or 1 with one error line when what was
/// written to the standard output did not reach it.
int finishOutput(int status, llvm::StringRef tool);

} // namespace graphc
