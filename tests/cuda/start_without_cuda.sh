#!/bin/sh
# The tools and test binaries must start where no CUDA library is installed:
# static cudart only, nothing CUDA among their dynamic dependencies (cuDNN,
# cuBLAS and NCCL are opened at run time), and they run with the loader path
# emptied. Arguments: binaries; those named graphc or graphrun also run --help.
status=0
for bin in "$@"; do
  if ldd "$bin" | grep -E 'libcuda|libcudart|libcudnn|libcublas|libnccl'; then
    echo "FAIL: $bin links a CUDA library"
    status=1
  fi
  case "$(basename "$bin")" in
  graphc | graphrun)
    if ! LD_LIBRARY_PATH= "$bin" --help >/dev/null; then
      echo "FAIL: $bin --help"
      status=1
    fi
    ;;
  *)
    if ! LD_LIBRARY_PATH= "$bin" --gtest_list_tests >/dev/null; then
      echo "FAIL: $bin does not start"
      status=1
    fi
    ;;
  esac
done
exit $status
