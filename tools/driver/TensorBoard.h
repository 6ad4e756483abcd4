//===- TensorBoard.h - Scalars of a training run for TensorBoard -*- C++ -*-===//
//
// `graphrun train --tensorboard DIR`: the chief writes one event file in DIR,
// events.out.tfevents.<seconds>.<host>.<pid>, that TensorBoard reads (it
// takes every file of a directory whose name holds "tfevents", in name
// order, and merges their steps; a resumed run adds a new file whose steps
// continue).
//
// The file is a sequence of TFRecords: the data's length (uint64, little
// endian), the masked CRC-32C of those 8 bytes, the data, the masked CRC-32C
// of the data. Each record's data is an Event (TensorBoardEvent.proto),
// serialized by the protobuf library: the first holds the file's version, the
// second the run's start (SessionLog START at its first step: TensorBoard then
// drops the steps from there on that an earlier file holds, those of a run
// killed past its last checkpoint, or of an earlier run into the same
// directory), the rest a step's scalars (tags under train/ and eval/). Each
// record is written whole as it comes (ir/OutputFile.h), so a run that stops
// early keeps the steps it wrote.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace graphc {

class OutputStream;
struct StepRecord;

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
/// TFRecord framing.
uint32_t crc32c(llvm::StringRef bytes);
/// The checksum a TFRecord stores: the CRC rotated right by 15 bits, plus a
/// constant (so that a CRC of data holding CRCs is not trivially related).
uint32_t maskedCrc32c(llvm::StringRef bytes);
/// `data` framed as one TFRecord.
std::string tfRecord(llvm::StringRef data);

struct TensorBoardScalar {
  llvm::StringRef tag;
  double value;
};

class TensorBoardWriter {
public:
  /// Creates `dir` (and its parents) when missing, and a new event file in it
  /// that starts with its version and a start of the run at `firstStep` (the
  /// step of its first record); an error names the directory or the file.
  static llvm::Expected<std::unique_ptr<TensorBoardWriter>> open(llvm::StringRef dir,
                                                                 int64_t firstStep);
  ~TensorBoardWriter();

  /// train/loss, train/learning_rate, train/images_per_second and, with loss
  /// scaling, train/loss_scale, at the record's step.
  llvm::Error step(const StepRecord &r);
  /// eval/accuracy (a classifier's) and eval/loss after `step` steps.
  llvm::Error eval(int64_t step, std::optional<double> accuracy, double loss);
  /// One event of `scalars` at `step`.
  llvm::Error scalars(int64_t step, llvm::ArrayRef<TensorBoardScalar> scalars);
  /// Closes the file; the run's last word on whether its events are there.
  llvm::Error close();

  const std::string &path() const { return path_; }

private:
  TensorBoardWriter(std::string path, std::unique_ptr<OutputStream> out);
  std::string path_;
  std::unique_ptr<OutputStream> out_;
};

} // namespace graphc
