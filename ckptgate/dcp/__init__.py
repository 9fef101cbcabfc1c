"""PyTorch Distributed Checkpoint (DCP) runs against the target (optional extra ckptgate[torch]).

``driver`` starts the ranks and runs the steps, ``worker`` is what each rank runs, ``model``
builds the training-checkpoint state, ``verify`` checks loaded content. Importing this package
does not import torch.
"""

from ckptgate.dcp.driver import DcpConfig, DcpRanks, DcpResult, run_dcp

__all__ = ["DcpConfig", "DcpRanks", "DcpResult", "run_dcp"]
