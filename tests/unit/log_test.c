/* Unit test of the log sink (include/znbd/log.h, lib/log.c): a sink
 * plugged in gets each message with its level and text (an injected
 * bad-block read through the device: a fault; a clamp of
 * znbd_params_finish: a note); with no sink, errors and warnings go to
 * stderr as "znbd: MESSAGE" and notes and faults nowhere; errno is kept
 * across a call. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "znbd/dev.h"
#include "znbd/log.h"
#include "check.h"
#include "testdev.h"

/* What the test sink saw: the last message and how many there were. */
struct seen {
  int n;
  enum znbd_log_level level;
  char msg[512];
};

static void
capture(void *opaque, enum znbd_log_level level, const char *msg)
{
  struct seen *s = opaque;
  s->n++;
  s->level = level;
  snprintf(s->msg, sizeof s->msg, "%s", msg);
}

/* S saw exactly one message, at LEVEL with text MSG. */
static void
expect_one(const struct seen *s, enum znbd_log_level level, const char *msg)
{
  CHECK_EQ(s->n, 1);
  CHECK_EQ(s->level, level);
  CHECKF(strcmp(s->msg, msg) == 0, "msg '%s', expected '%s'", s->msg, msg);
}

static void
test_sink(void)
{
  struct seen s = {0};
  znbd_log_set_sink(capture, &s);
  errno = EBADF;
  znbd_log(ZNBD_LOG_WARNING, "w %d %s", 42, "x");
  CHECK_EQ(errno, EBADF);
  expect_one(&s, ZNBD_LOG_WARNING, "w 42 x");
  znbd_log_set_sink(NULL, NULL);
  printf("sink: level and text of a message, errno kept\n");
}

/* A read of sector 8, which is bad: one fault with the device's words. */
static void
test_fault(void)
{
  static const char *const kv[] = {"size",      "1M", "zoned", "false",
                                   "badblocks", "8",  NULL};
  uint8_t buf[512];
  struct znbd_params p;
  test_params(&p, kv);
  struct seen s = {0};
  struct znbd_dev *d = test_dev(&p);
  znbd_log_set_sink(capture, &s);
  CHECK_EQ(znbd_dev_read(d, buf, 512, 0, 0), 0);
  CHECK_EQ(s.n, 0);
  errno = 0;
  CHECK_EQ(znbd_dev_read(d, buf, 512, 4096, 0), -1);
  CHECK_EQ(errno, EIO);
  expect_one(&s, ZNBD_LOG_FAULT,
             "badblock: read of 512 bytes at 4096: bad sectors from 8; 0 "
             "bytes done");
  znbd_log_set_sink(NULL, NULL);
  znbd_dev_free(d);
  printf("fault: a bad-block read arrives as ZNBD_LOG_FAULT\n");
}

/* zone_nr_conv=8 of 8 zones leaves no sequential zone: clamped to 7. */
static void
test_note(void)
{
  struct seen s = {0};
  struct znbd_params p;
  znbd_log_set_sink(capture, &s);
  test_params(&p, (const char *const[]){"size", "8M", "zone_size", "1M",
                                        "zone_nr_conv", "8", NULL});
  znbd_log_set_sink(NULL, NULL);
  CHECK_EQ(p.zone_nr_conv, 7);
  expect_one(&s, ZNBD_LOG_NOTE,
             "zone_nr_conv: 8 leaves no sequential zone of 8; clamped to 7 "
             "(as null_blk)");
  znbd_params_free(&p);
  printf("note: a params clamp arrives as ZNBD_LOG_NOTE\n");
}

/* The default sink, with stderr sent to a temporary file. */
static void
test_default(void)
{
  char path[] = "/tmp/znbd-log-test.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0)
    return;
  unlink(path);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  CHECK(saved >= 0 && dup2(fd, STDERR_FILENO) == STDERR_FILENO);
  znbd_log(ZNBD_LOG_ERROR, "e %d", 1);
  znbd_log(ZNBD_LOG_WARNING, "w %d", 2);
  znbd_log(ZNBD_LOG_NOTE, "n %d", 3);
  znbd_log(ZNBD_LOG_FAULT, "f %d", 4);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  char got[128] = "";
  ssize_t n = pread(fd, got, sizeof got - 1, 0);
  close(fd);
  CHECK(n >= 0);
  CHECKF(strcmp(got, "znbd: e 1\nznbd: w 2\n") == 0, "stderr '%s'", got);
  printf("default: errors and warnings on stderr, notes and faults not\n");
}

int
main(void)
{
  test_sink();
  test_fault();
  test_note();
  test_default();
  return check_done("log_test");
}
