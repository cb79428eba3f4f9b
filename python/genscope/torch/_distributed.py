"""The run's place in a torch.distributed job, and a barrier step that aligns the ranks' clocks.

The C++ monitor already reads RANK, WORLD_SIZE, LOCAL_RANK, GROUP_RANK and the group id
(GENSCOPE_DISTRIBUTED_GROUP, TORCHELASTIC_RUN_ID, MASTER_ADDR:MASTER_PORT) when a run starts.
mark_distributed() adds what only an initialised process group knows: the rank and world size
of a job started without those variables (torch.multiprocessing.spawn with an init_method),
and the init method as the group id when nothing else names it. docs/distributed.md.
"""

import os
from typing import Any, Dict, Optional

from .. import _genscope


def _torch_distributed() -> Any:
    try:
        import torch.distributed as dist
    except Exception:  # no torch, or a build without distributed support
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return dist
    except Exception:
        return None
    return None


def distributed_info() -> Optional[Dict[str, Any]]:
    """The distributed identity of this process: from an initialised torch.distributed process
    group (rank, world size), completed by the environment (local and node rank, group id);
    the environment's alone when no group is initialised; None outside a distributed job.
    """
    env = _genscope.distributed_from_environment()
    dist = _torch_distributed()
    if dist is None:
        return env
    info: Dict[str, Any] = dict(env) if env is not None else {
        "role": "rank", "local_rank": -1, "node_rank": -1, "group": "", "group_source": ""}
    info["rank"] = int(dist.get_rank())
    info["world_size"] = int(dist.get_world_size())
    if not info.get("group") and os.environ.get("GENSCOPE_DISTRIBUTED_GROUP"):
        # genscope run's group for ranks started without RANK (torch.multiprocessing.spawn)
        info["group"], info["group_source"] = os.environ["GENSCOPE_DISTRIBUTED_GROUP"], "genscope"
    if not info.get("group"):
        # torch's default group keeps its init method ("env://", "tcp://host:port", "file://...");
        # like MASTER_ADDR:MASTER_PORT it names the address, not one launch.
        init = getattr(dist.distributed_c10d, "_default_pg_init_method", None)
        if init:
            info["group"], info["group_source"] = str(init), "process_group"
    return info


def mark_distributed(run: Any) -> Optional[Dict[str, Any]]:
    """Sets the run's distributed identity from distributed_info() when a process group is
    initialised (the environment's is already there otherwise). Returns what was set, or None.
    Never raises: a failure is a monitoring error of the run.
    """
    try:
        if _torch_distributed() is None or not run.active:
            return None
        info = distributed_info()
        if info is None:
            return None
        run.set_distributed(info["rank"], info["world_size"], local_rank=info.get("local_rank", -1),
                            node_rank=info.get("node_rank", -1), group=info.get("group", ""),
                            group_source=info.get("group_source", ""))
        return info
    except Exception as e:  # the pipeline never sees genscope's failures
        run.record_monitoring_error("distributed", f"{type(e).__name__}: {e}")
        return None


def barrier(run: Any, name: str = "barrier", group: Any = None) -> None:
    """torch.distributed.barrier() inside a step labelled `distributed.barrier`: every rank
    leaves it at the same moment, so `genscope merge` aligns the ranks' clocks on its end.
    Without an initialised process group the step is recorded as skipped.
    """
    with run.step("custom", name) as step:
        step.label("distributed.barrier", "true")
        dist = _torch_distributed()
        if dist is None:
            step.skip("no initialised torch.distributed process group")
        else:
            dist.barrier(group=group)
