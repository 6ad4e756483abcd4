//===- MpiSession.cpp - What the MPI parts of a world share ---------------===//

#include "executor/dist/MpiSession.h"

namespace graphc {

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

} // namespace graphc
