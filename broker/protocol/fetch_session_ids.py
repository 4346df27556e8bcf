"""KIP-227's session id and epoch as a Fetch carries them: what a fetcher (broker/replica/
replica_fetcher.py) and the leader's session cache (broker/apis/fetch_session.py) agree on."""

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: +1, wrapping from MAX_INT to 1; FINAL stays FINAL."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch >= MAX_EPOCH else epoch + 1
