"""PyTorch Distributed Checkpoint (DCP) runs against the target (optional extra ckptgate[torch]).

``driver`` runs the steps and measures them, ``ranks`` the rank processes (the engine's
``RankPool`` joined in one gloo group), ``worker`` is what each rank runs, ``records`` what a
step returns (``DcpStep``), ``model`` builds the training-checkpoint state, ``verify`` checks
loaded content. Importing this package
does not import torch.
"""

from ckptgate.dcp.driver import DcpConfig, DcpResult, run_dcp
from ckptgate.dcp.ranks import DcpRankFailure, DcpRanks
from ckptgate.dcp.records import DcpStep

__all__ = ["DcpConfig", "DcpRankFailure", "DcpRanks", "DcpResult", "DcpStep", "run_dcp"]
