/* TLS for a znbd built without GnuTLS (configure found no
 * libgnutls28-dev): --tls=off works as ever, --tls=on|require stops
 * start-up with a message naming the option.  The per-connection calls
 * are never reached: no connection is offered TLS (handshake.c answers
 * NBD_OPT_STARTTLS with NBD_REP_ERR_UNSUP when TLS is off). */
#include <stdio.h>
#include <stdlib.h>

#include "tls.h"

int
tls_setup(struct tls_opts *o, char *err, size_t errlen)
{
  if (o->mode == TLS_OFF)
    return 0;
  snprintf(err, errlen,
           "--tls: this znbd was built without GnuTLS (install "
           "libgnutls28-dev and build again to serve NBD over TLS)");
  return -1;
}

void
tls_cleanup(void)
{
}

struct tls *
tls_new(void)
{
  return NULL;
}

/* Unreachable without a session (tls_new() gives none). */
#define NO_TLS abort()

void
tls_free(struct tls *t)
{
  (void)t;
}
uint8_t *
tls_rx_space(struct tls *t, size_t min, size_t *len)
{
  NO_TLS;
}
void
tls_rx_commit(struct tls *t, size_t n)
{
  NO_TLS;
}
size_t
tls_rx_pending(const struct tls *t)
{
  NO_TLS;
}
bool
tls_rx_put(struct tls *t, const void *p, size_t len)
{
  NO_TLS;
}
int
tls_handshake(struct tls *t)
{
  NO_TLS;
}
ssize_t
tls_read(struct tls *t, void *p, size_t n)
{
  NO_TLS;
}
bool
tls_read_pending(struct tls *t)
{
  NO_TLS;
}
void
tls_write_begin(struct tls *t)
{
  NO_TLS;
}
int
tls_write(struct tls *t, const void *p, size_t n)
{
  NO_TLS;
}
int
tls_write_end(struct tls *t)
{
  NO_TLS;
}
size_t
tls_tx_fill_len(const struct tls *t)
{
  NO_TLS;
}
const uint8_t *
tls_tx_take(struct tls *t, size_t *len)
{
  NO_TLS;
}
size_t
tls_tx_len(const struct tls *t)
{
  NO_TLS;
}
void
tls_tx_done(struct tls *t)
{
  NO_TLS;
}
void
tls_give_back(struct tls *t, size_t keep, bool rx_idle)
{
  NO_TLS;
}
