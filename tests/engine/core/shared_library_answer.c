/* A shared library that SharedLibrary's tests open (shared_library_test.cpp); nothing links it. */
int ringmaster_test_answer(void) {
  return 42;
}
