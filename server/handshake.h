/* znbd server: the NBD handshake on buffers (handshake.c): the
 * greeting, the options, STARTTLS (doc/proto.md of the NBD project,
 * "Fixed newstyle negotiation").
 */
#ifndef ZNBD_SERVER_HANDSHAKE_H
#define ZNBD_SERVER_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "proto.h"

/* Start a connection: appends the server greeting to OUT. */
void nbdc_init(struct nbdc *c, const struct srv_cfg *cfg, struct buf *out);

/* The TLS handshake that followed NBD_OPT_STARTTLS succeeded: options go
 * on over TLS.  What was negotiated before it (structured replies,
 * metadata contexts) is forgotten, as it was sent in the clear. */
void nbdc_tls_up(struct nbdc *c);

/* Transmission flags this connection was given. */
uint16_t nbdc_tflags(const struct nbdc *c);

/* For nbdc_feed(): one handshake step on IN[0..LEN) (C->phase PH_CFLAGS
 * or PH_OPTS): the client flags or one complete option, answered into
 * OUT.  Returns the bytes consumed, or 0 with *NEED (bytes) set when the
 * message is incomplete. */
size_t nbdc_handshake_step(struct nbdc *c, const uint8_t *in, size_t len,
                           struct buf *out, size_t *need);

/* Append an option reply of TYPE (an NBD_REP_ERR_* value) to OPT with
 * MSG (a string) as its data to OUT.  Aborts without memory. */
void nbdc_opt_error(struct buf *out, uint32_t opt, uint32_t type,
                    const char *msg);

#endif
