/* znbd unit tests: tiny check macros.  CHECK prints nothing on success
 * and the failing expression with its location otherwise; the program
 * then exits 1 at the end (all checks run).  Values are printed by the
 * _EQ forms so a failure says what was seen. */
#ifndef ZNBD_TEST_CHECK_H
#define ZNBD_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures, check_count;

#define CHECK(expr)                                                            \
  do {                                                                         \
    check_count++;                                                             \
    if (!(expr)) {                                                             \
      check_failures++;                                                        \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #expr);          \
    }                                                                          \
  } while (0)

/* CHECK with a printf-style message saying what was seen. */
#define CHECKF(expr, ...)                                                      \
  do {                                                                         \
    check_count++;                                                             \
    if (!(expr)) {                                                             \
      check_failures++;                                                        \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                     \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
    }                                                                          \
  } while (0)

#define CHECK_EQ(a, b)                                                         \
  do {                                                                         \
    uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                           \
    check_count++;                                                             \
    if (a_ != b_) {                                                            \
      check_failures++;                                                        \
      fprintf(stderr, "FAIL %s:%d: %s == %s: %" PRIu64 " != %" PRIu64 "\n",    \
              __FILE__, __LINE__, #a, #b, a_, b_);                             \
    }                                                                          \
  } while (0)

static inline int
check_done(const char *name)
{
  printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
  return check_failures ? 1 : 0;
}

#endif
