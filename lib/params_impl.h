/* znbd lib-internal: the parameter table's entries, shared by the files
 * that read it (lib/params.c the table and its lookups, lib/params_parse.c
 * parsing key=value words, lib/params_help.c the help text and who uses
 * what, lib/params_finish.c the checks across parameters and the
 * geometry); include/znbd/params.h is what the front-ends see.
 */
#ifndef ZNBD_PARAMS_IMPL_H
#define ZNBD_PARAMS_IMPL_H

#include <assert.h>
#include <stddef.h>

#include "znbd/params.h"

/* One entry of the table (lib/params.c says what each field means). */
struct param {
  struct znbd_param_info i;
  size_t off, size; /* the field in struct znbd_params */
};

/* The table, in the order --help lists them, and its length. */
extern const struct param znbd_param_table[];
extern const size_t znbd_param_nr;

/* The entry named KEY (up to a '=' in it), or NULL. */
const struct param *znbd_param_entry(const char *key);

/* Where entry E's value lives in P; checks the table's size for TYPE. */
static inline void *
znbd_param_field(struct znbd_params *p, const struct param *e, size_t size)
{
  assert(e->size == size);
  (void)size;
  return (char *)p + e->off;
}

#endif
