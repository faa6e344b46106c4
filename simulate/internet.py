"""The FCF paper's Internet: a TCP connection's transfer time from its RTT and bandwidth (slow start)."""

from __future__ import annotations

MSS = 1460
INITIAL_WINDOW = 2     # segments
RECEIVE_WINDOW = 11    # segments (16 KB, a common receiver window of the period)


class Pipe:
    """One connection's sending side: data handed to it leaves in slow-start rounds of one RTT.

    A round carries min(cwnd, receive window) segments and lasts max(RTT, bytes / bandwidth);
    cwnd doubles each round. A loss (the RTT draw passed the cap) costs one extra round of the
    capped RTT, a time-out, on the first round.
    """

    __slots__ = ("rtt", "rate", "free_at", "cwnd", "loss")

    def __init__(self, rtt: float, bandwidth_bps: float, lost: bool) -> None:
        self.rtt = rtt
        self.rate = bandwidth_bps / 8.0
        self.free_at = 0.0
        self.cwnd = INITIAL_WINDOW
        self.loss = lost

    def send(self, now: float, nbytes: int) -> float:
        """Hand `nbytes` to the connection at `now`; returns when the last of them is delivered."""
        t = max(now, self.free_at)
        if self.loss:
            t += self.rtt
            self.loss = False
        rtt, rate, cwnd = self.rtt, self.rate, self.cwnd
        while nbytes > 0:
            chunk = min(cwnd, RECEIVE_WINDOW) * MSS
            if chunk > nbytes:
                chunk = nbytes
            t += max(rtt, chunk / rate)
            nbytes -= chunk
            if cwnd < RECEIVE_WINDOW:
                cwnd *= 2
        self.cwnd = cwnd
        self.free_at = t
        return t


def transfer_time(nbytes: int, rtt: float, bandwidth_bps: float) -> float:
    """Time to deliver `nbytes` over an idle, loss-free connection: the Internet cost of a request."""
    return Pipe(rtt, bandwidth_bps, False).send(0.0, nbytes)
