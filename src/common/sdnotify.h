/*
 * systemd's readiness protocol (sd_notify(3)), for units of Type=notify:
 * one datagram of "KEY=VALUE" lines to the AF_UNIX socket named by
 * $NOTIFY_SOCKET.  systemd documents the protocol as stable for programs
 * that do not link libsystemd; the ten lines here spare every binary that
 * library and its build dependency.
 */
#ifndef ORCH_COMMON_SDNOTIFY_H
#define ORCH_COMMON_SDNOTIFY_H

/*
 * Sends @state (e.g. "READY=1\nSTATUS=serving") to $NOTIFY_SOCKET.
 * Returns 0 when sent or when $NOTIFY_SOCKET is not set (not run by
 * systemd: nobody to tell), -EAFNOSUPPORT for a socket address that is
 * neither a path nor abstract ('@'), -ENAMETOOLONG, or the -errno of
 * socket/sendto.  Any thread.
 */
int orch_sdnotify_send(const char *state);

#endif
