"""The exactly-once recovery rule (streamk.engine.recovery) against a brute-force oracle.

The oracle simulates a consumer group event by event: workers take turns owning a
partition, learn a run of events, write durable snapshots, commit after some of them (or
are killed in between), and sometimes lose their newest snapshot. The truth is the set of
events held by each worker's newest surviving snapshot. When that set is exactly
``[0, T)`` with no event twice, the only exactly-once place to resume is ``T``; the rule,
given only what an engine can see (its own snapshot, the commit and its metadata, the
peers' snapshots), must find it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamk.engine.recovery import commit_metadata, parse_commit_metadata, resume_offsets

ME = "w0"
WORKERS = ["w0", "w1", "w2"]


def test_metadata_round_trip_and_foreign_text():
    assert parse_commit_metadata(commit_metadata("worker-a", 12)) == ("worker-a", 12, "")
    assert parse_commit_metadata(commit_metadata("w", 3, "ab12")) == ("w", 3, "ab12")
    for foreign in (None, "", "hello", "[1, 2]", '{"model": 3, "seq": 1}', '{"model": "a"}'):
        assert parse_commit_metadata(foreign) is None


def _resume(own, committed, peers, p=0):
    return resume_offsets([p], model_name=ME, own=own, committed=committed, peers=peers)


def test_lost_newest_snapshot_of_our_own_is_relearned():
    r = _resume({0: 1500}, {0: (2000, commit_metadata(ME, 4))}, {})
    assert r.offsets[0] == 1500
    assert any("learned again" in n for n in r.notes)


def test_peer_killed_between_snapshot_and_commit():
    r = _resume({}, {0: (5900, commit_metadata("w1", 20))}, {"w1": {0: 6200}})
    assert r.offsets[0] == 6200


def test_peer_commit_counts_when_its_snapshots_are_not_visible():
    r = _resume({0: 100}, {0: (5900, commit_metadata("w1", 20))}, {})
    assert r.offsets[0] == 5900


def test_peer_that_lost_its_newest_snapshot_is_not_trusted_past_it():
    r = _resume({}, {0: (2000, commit_metadata("w1", 9))}, {"w1": {0: 1500}})
    assert r.offsets[0] == 1500


def test_same_model_name_from_another_store_is_another_writer():
    """Two engines given one name but separate stores: the other's commit is coverage."""
    theirs = commit_metadata(ME, 7, "store-b")
    r = resume_offsets(
        [0], model_name=ME, own={0: 100}, committed={0: (900, theirs)}, peers={}, store_id="a"
    )
    assert r.offsets[0] == 900
    ours = commit_metadata(ME, 7, "a")
    r = resume_offsets(
        [0], model_name=ME, own={0: 100}, committed={0: (900, ours)}, peers={}, store_id="a"
    )
    assert r.offsets[0] == 100


def test_commit_without_metadata_is_trusted_with_a_warning():
    r = _resume({0: 10}, {0: (50, "")}, {})
    assert r.offsets[0] == 50 and r.notes


@st.composite
def histories(draw):
    """Turns of (owner, events learned, snapshot points, commit?, killed?), plus losses."""
    turns = draw(
        st.lists(
            st.tuples(
                st.sampled_from(WORKERS),
                st.integers(1, 40),  # events learned in the turn
                st.integers(0, 3),  # snapshots written in the turn
                st.booleans(),  # commit after the last snapshot
                st.integers(0, 2),  # losses of a newest snapshot after the turn (worker index)
                st.booleans(),  # whether a loss happens
            ),
            min_size=1,
            max_size=8,
        )
    )
    visible = draw(st.booleans())  # peers' snapshots visible (shared store or topic)
    return turns, visible


def _true_resume(snapshots):
    """Events held by each worker's newest surviving snapshot; T if they are [0, T) once."""
    held = []
    for snaps in snapshots.values():
        if snaps:
            held.extend(snaps[-1][1])
    if len(held) != len(set(held)) or set(held) != set(range(len(held))):
        return None
    return len(held)


@settings(max_examples=400, deadline=None)
@given(histories())
def test_rule_resumes_exactly_once_on_random_group_histories(case):
    turns, visible = case
    snapshots: dict[str, list[tuple[int, list[int]]]] = {w: [] for w in WORKERS}
    learned = {w: [] for w in WORKERS}  # what each worker's live model holds
    commit: tuple[int, str] | None = None
    committer = last_writer = None  # whose commit that is; who wrote the newest snapshot
    seq = dict.fromkeys(WORKERS, 0)
    wrote = dict.fromkeys(WORKERS, False)
    for owner, n, n_snaps, commits, lose_idx, lose in turns:
        truth = _true_resume(snapshots)
        if truth is None:
            return  # an earlier loss left a gap no resume point can mend
        # The owner restarts from its newest durable snapshot and resumes exactly-once.
        learned[owner] = list(snapshots[owner][-1][1]) if snapshots[owner] else []
        start = truth
        new = list(range(start, start + n))
        cuts = sorted({max(1, n * (i + 1) // max(n_snaps, 1)) for i in range(n_snaps)})
        done = 0
        for cut in cuts:
            learned[owner] += new[done:cut]
            done = cut
            seq[owner] += 1
            snapshots[owner].append((start + cut, list(learned[owner])))
            wrote[owner] = True
        if cuts:
            last_writer = owner
        if commits and cuts:
            commit = (snapshots[owner][-1][0], commit_metadata(owner, seq[owner]))
            committer = owner
        if lose and snapshots[WORKERS[lose_idx]]:
            snapshots[WORKERS[lose_idx]].pop()
    truth = _true_resume(snapshots)
    if truth is None:
        return
    own = {0: snapshots[ME][-1][0]} if snapshots[ME] else {}
    # A visible store shows every model that ever wrote a snapshot, even with none left.
    peers = (
        {w: ({0: s[-1][0]} if s else {}) for w, s in snapshots.items() if w != ME and wrote[w]}
        if visible
        else {}
    )
    committed = {0: commit} if commit is not None else {}
    got = resume_offsets([0], model_name=ME, own=own, committed=committed, peers=peers)
    if visible:
        assert got.offsets[0] == truth, (turns, snapshots, commit)
    else:
        # Without the peers' snapshots only their commits are seen: never past the truth
        # unless a commit says so, and exact whenever the last writer also committed. (Not
        # merely a commit at the truth: w0 committed 7 and lost its snapshots back to 2, then
        # w1 learned 2-6 without committing; w0 cannot see w1's work and learns 2-6 again.)
        last_writer_committed = (
            commit is not None and committer == last_writer and commit[0] == truth
        )
        if last_writer_committed:
            assert got.offsets[0] == truth
