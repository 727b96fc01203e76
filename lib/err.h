/* znbd lib-internal: the one way lib/ functions fill a caller's error
 * buffer (ERR, ERRLEN as in the public headers: may be NULL / 0). */
#ifndef ZNBD_LIB_ERR_H
#define ZNBD_LIB_ERR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline void __attribute__((format(printf, 3, 4)))
set_err(char *err, size_t errlen, const char *fmt, ...)
{
  if (!err || errlen == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

#endif
