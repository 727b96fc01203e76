/* A zone operation applied to every zone it fits: reset-all (null_blk's
 * REQ_OP_ZONE_RESET_ALL) and ZBC's ALL bit for OPEN, CLOSE and FINISH
 * (ZBC-2 5.2, 5.3, 5.5).  One implementation for every front-end that
 * offers "all": the control socket's "OP all" and znbd-tcmu's ZBC OUT
 * with ALL=1, so the two agree zone for zone. */
#include <errno.h>
#include <stdbool.h>

#include "znbd/request.h"
#include "refusal.h"

#define BATCH 64

static bool
is_open(enum znbd_zone_cond c)
{
  return c == ZNBD_ZONE_COND_IMP_OPEN || c == ZNBD_ZONE_COND_EXP_OPEN;
}

/* Whether reset-all resets a zone in condition Z. */
static bool
resettable(const struct znbd_zone_info *z)
{
  return z->type == ZNBD_ZONE_TYPE_SEQWRITE_REQ &&
         z->cond != ZNBD_ZONE_COND_EMPTY &&
         z->cond != ZNBD_ZONE_COND_READONLY &&
         z->cond != ZNBD_ZONE_COND_OFFLINE;
}

/* Apply OP, in index order, to every zone that is open (OPEN_ZONES) or
 * CLOSED (not OPEN_ZONES) when the scan reaches it; stop at the first
 * refusal, as znbd_req_zone_op_all() says. */
static int
apply(const struct znbd_req_ctx *c, enum znbd_zone_op op, bool open_zones,
      struct znbd_zone_all *res)
{
  struct znbd_dev *d = c->dev;
  uint32_t nr = znbd_dev_nr_zones(d), got;
  struct znbd_zone_info z[BATCH];

  for (uint32_t i = 0; i < nr; i += got) {
    got = znbd_dev_report(d, i, BATCH, z);
    if (got == 0)
      break;
    for (uint32_t j = 0; j < got; j++) {
      if (open_zones ? !is_open(z[j].cond) : z[j].cond != ZNBD_ZONE_COND_CLOSED)
        continue;
      if (znbd_req_zone_op(c, op, i + j) == -1) {
        res->zone = i + j;
        res->before = z[j];
        return -1;
      }
      res->done++;
    }
  }
  return 0;
}

int
znbd_req_zone_op_all(const struct znbd_req_ctx *c, enum znbd_zone_op op,
                     struct znbd_zone_all *res)
{
  struct znbd_dev *d = c->dev;
  uint32_t nr = znbd_dev_nr_zones(d), got;
  struct znbd_zone_info z[BATCH];
  struct znbd_dev_stats st;
  const struct znbd_params *p = znbd_dev_params(d);

  res->done = res->closed = 0;
  res->zone = ZNBD_ALL_ZONES;
  znbd_refusal_now = ZNBD_REFUSAL_NONE;
  if (nr == 0) {
    errno = EINVAL;
    return -1;
  }
  switch (op) {
  case ZNBD_ZONE_OP_RESET:
    /* Count what reset-all will reset, for the caller. */
    for (uint32_t i = 0; i < nr; i += got) {
      got = znbd_dev_report(d, i, BATCH, z);
      if (got == 0)
        break;
      for (uint32_t j = 0; j < got; j++)
        res->done += resettable(&z[j]);
    }
    return znbd_req_zone_op(c, ZNBD_ZONE_OP_RESET, ZNBD_ALL_ZONES);
  case ZNBD_ZONE_OP_CLOSE:
    return apply(c, op, true, res);
  case ZNBD_ZONE_OP_FINISH:
    /* Open zones first: finishing them frees the open slots that
     * finishing a CLOSED zone needs (null_blk's null_check_open()). */
    if (apply(c, op, true, res) == -1)
      return -1;
    return apply(c, op, false, res);
  case ZNBD_ZONE_OP_OPEN:
    /* ZBC-2 5.5: refused, changing nothing, if the CLOSED and EXP_OPEN
     * zones would not all fit under the open limit.  CLOSED zones are
     * counted by their condition: the engine's closed counter also holds
     * CLOSED zones made READONLY or OFFLINE whose finish was refused
     * (zone.h, SET_*), which open all leaves alone. */
    znbd_dev_stats(d, &st);
    for (uint32_t i = 0; i < nr; i += got) {
      got = znbd_dev_report(d, i, BATCH, z);
      if (got == 0)
        break;
      for (uint32_t j = 0; j < got; j++)
        res->closed += z[j].cond == ZNBD_ZONE_COND_CLOSED;
    }
    if (p->zone_max_open != 0 &&
        (uint64_t)st.nr_exp_open + res->closed > p->zone_max_open) {
      znbd_refuse(ZNBD_REFUSAL_ZONE_OPEN_RESOURCE, ETOOMANYREFS);
      return -1;
    }
    return apply(c, op, false, res);
  default:
    errno = EINVAL;
    return -1;
  }
}
