"""The writer a DCP user gets by default, said in one line (issue 35).

A profile that says DCP saves its checkpoint (a ``dcp:`` section, or an async save with a
``dcp.checkpointer``) but leaves ``cluster.layout.writer`` to its default gets the burst laid
out as Megatron's, not as DCP's planner would: the default is kept, so that no profile's
numbers change under its users, and the run says so, with how to change it, or why
``writer: dcp`` does not apply to this profile.
"""

from __future__ import annotations

from collections.abc import Collection

from ckptgate.sizing.schema import DcpWriterRefusal, Profile, dcp_writer_refusals

WRITER_KEY = "cluster.layout.writer"


def _dcp_saves(profile: Profile, given: Collection[str]) -> str | None:
    """What in the profile says DCP saves it, in words; None: nothing does."""
    if profile.checkpoint.mode == "async" and "dcp.checkpointer" in given:
        return (
            "this profile's async save is DCP's (checkpoint.mode: async, dcp.checkpointer: "
            f"{profile.dcp.checkpointer})"
        )
    if "dcp" in given:
        return "this profile's dcp: section has the checklist save with PyTorch DCP"
    return None


def _why(refusal: DcpWriterRefusal) -> str:
    if refusal.key == WRITER_KEY:  # the writer itself: nothing else to name
        return refusal.problem
    return f"{refusal.key} {refusal.value}: {refusal.problem}"


def writer_default_note(profile: Profile, given: Collection[str]) -> str | None:
    """The one line for a profile that says DCP saves it and does not give ``WRITER_KEY``
    (``given``: the key paths its YAML and ``--set`` gave, ``Profile.given_keys``): the
    writer it gets, and either how to get DCP's layout or every reason the loader would
    refuse ``writer: dcp`` here. None where the writer is given or nothing says DCP."""
    if WRITER_KEY in given:
        return None
    saves = _dcp_saves(profile, given)
    if saves is None:
        return None
    head = (
        f"writer: {profile.cluster.layout.writer} (the default): the burst is laid out as "
        f"Megatron's, though {saves}"
    )
    refusals = dcp_writer_refusals(profile)
    if refusals:
        why = "; ".join(_why(r) for r in refusals)
        return f"{head}; {WRITER_KEY}: dcp does not apply to it ({why})"
    return (
        f"{head}; set {WRITER_KEY}: dcp for DCP's own layout (its planner over "
        "model.architecture's tensors, rank by rank and file by file)"
    )


def profile_notes(profile: Profile) -> list[str]:
    """What ckptgate says about a choice the profile left to a default: in a run's header
    (each line after ``ckptgate: ``) and JSON report (``profile_notes``), and in the sizing's
    header and JSON. Today one: the writer a profile that DCP saves gets without
    ``WRITER_KEY`` (``writer_default_note``)."""
    note = writer_default_note(profile, profile.given_keys)
    return [] if note is None else [note]
