/*
 * ctrue.c - true(1) built by the build's own compiler: a program that is
 * not Python and uses the library's C library.  test_process.py's
 * execv_into_true execs it under a musl interpreter (this machine's
 * /bin/true is a glibc program, into which a musl library cannot load).
 */
int main(void)
{
    return 0;
}
