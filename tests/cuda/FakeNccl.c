/* A stand-in libnccl.so.2 with only ncclGetVersion (LibraryLoadTest.cpp). */
int ncclGetVersion(int *version) {
  *version = 22809;
  return 0;
}
