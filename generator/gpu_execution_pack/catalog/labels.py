"""Label names: the contract's labels on recorded series, and how exporters and Kubernetes spell theirs."""

from __future__ import annotations

# --- Labels -----------------------------------------------------------------------------------
EXECUTION_LABEL = "execution_id"  # the contract's label on every recorded series
HOST_LABEL = "hostname"  # the contract's host label on every recorded series
SHARD_LABEL = "shard"  # the scrape shard a heartbeat comes from (sharding.shards)

# dcgm-exporter's labels of a GPU: its index on the host, its UUID (one physical GPU), its model,
# and on MIG instances the instance's id and profile, which stay absent elsewhere.
GPU_INDEX_LABEL = "gpu"
UUID_LABEL = "UUID"
MODEL_LABEL = "modelName"
MIG_INSTANCE_LABEL = "GPU_I_ID"
MIG_PROFILE_LABEL = "GPU_I_PROFILE"
# Labels that identify one GPU, or one MIG instance of it, on every execution_gpu: series.
GPU_IDENTITY_LABELS: tuple[str, ...] = (
    HOST_LABEL,
    GPU_INDEX_LABEL,
    UUID_LABEL,
    MODEL_LABEL,
    MIG_INSTANCE_LABEL,
    MIG_PROFILE_LABEL,
)
# The labels a mapping metric joins on: a GPU's UUID and, on MIG, its instance id (CEEMS style).
GPU_JOIN_LABELS: tuple[str, ...] = (UUID_LABEL, MIG_INSTANCE_LABEL)
# A MIG instance's compute slices, read from its GPU instance profile (`3g.40gb`, `1g.10gb+me`): NVIDIA's
# profiles run from 1g to 7g (seven slices is a whole A100, H100 or B200). An instance whose profile does
# not read so (an MI300 partition's `cpx`, equal partitions) weighs one slice: see catalog.instance_share.
MIG_SLICES: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7)
MIG_SLICE_PROFILE = r"{slices}g\..*"  # matched against GPU_I_PROFILE, for each count in MIG_SLICES
# One GPU (or MIG instance) whoever holds it: under time-slicing or MPS dcgm-exporter publishes it
# once per pod that holds it, so several executions' series carry the same device labels.
DEVICE_LABELS: tuple[str, ...] = (HOST_LABEL, UUID_LABEL, MIG_INSTANCE_LABEL)

# Behind a ServiceMonitor with honorLabels: false (the Helm chart's and the GPU Operator's default)
# a workload's pod labels arrive as exported_<label>, while namespace and pod name the exporter
# itself: a label is read from exported_<label> where that is present.
EXPORTED_PREFIX = "exported_"
KUBERNETES_JOIN_LABELS: tuple[str, ...] = ("namespace", "pod")
# dcgm-exporter's pod mapping under --use-old-namespace (DCGM_EXPORTER_USE_OLD_NAMESPACE), kept from its 1.x labels:
# the workload's pod, namespace and container under these names, which the rules do not read (doctor names them).
OLD_POD_LABELS: dict[str, str] = {"pod": "pod_name", "namespace": "pod_namespace", "container": "container_name"}
# The same flag spells every GPU's UUID label `uuid` (internal/pkg/collector/gpu_collector.go: uuid := "UUID"; if
# useOld { uuid = "uuid" }), on every series and with or without the pod mapping: the rules read UUID_LABEL.
OLD_UUID_LABEL = "uuid"

# ROCm device-metrics-exporter's labels of a GPU (AMD), which the AMD group (rules.amd) copies into the
# names above. Every MI300 partition is its own gpu_id; serial_number, card_model and card_series are its
# partition-0 parent's, so the serial names the physical device. gpu_uuid is optional (on in the shipped
# configs); card_series, the readable model, too. Partition labels since v1.2.0.
AMD_GPU_INDEX_LABEL = "gpu_id"
AMD_SERIAL_LABEL = "serial_number"
AMD_UUID_LABEL = "gpu_uuid"
AMD_MODEL_LABEL = "card_model"  # a board part number, e.g. 102-G30211-0C
AMD_SERIES_LABEL = "card_series"  # e.g. "AMD Instinct MI300X OAM"
AMD_PARTITION_LABEL = "gpu_partition_id"
AMD_PARTITION_TYPE_LABEL = "gpu_compute_partition_type"  # spx, dpx, tpx, qpx, cpx (none where unsupported)
# Compute partition modes that split a GPU into instances (spx and none do not); values were spelled in
# upper case by some releases, so they are matched without regard to case.
AMD_PARTITIONED_MODES = ("dpx", "tpx", "qpx", "cpx")
# A scratch label the AMD group joins the partition mode, id and serial into, and removes again.
AMD_PARTITION_SCRATCH = "amd_partition"

# --- Host identity --------------------------------------------------------------------------
# A host's name is resolved once per scrape target (job, instance), not guessed per series:
# rules.recording records which host each dcgm-exporter and node_exporter target is on.
JOB_LABEL = "job"
INSTANCE_LABEL = "instance"  # the target's address, host:port
TARGET_LABELS: tuple[str, ...] = (JOB_LABEL, INSTANCE_LABEL)
# dcgm-exporter's host label: Hostname up to 4.8.2, hostname from 4.8.3; a scrape config may add
# its own hostname beside an old exporter's Hostname.
LEGACY_HOST_LABEL = "Hostname"
DCGM_HOST_LABELS: tuple[str, ...] = (HOST_LABEL, LEGACY_HOST_LABEL)
# kube-state-metrics' kube_pod_info names each pod's node: the dcgm-exporter pod's node is its GPUs'.
POD_NODE_LABEL = "node"
# The host part of a target's address ("10.0.0.7" of "10.0.0.7:9400"): dcgm-exporter and
# node_exporter scraped from one machine share it.
ADDRESS_REGEX = "(.+):[0-9]+"
# kube-state-metrics exposes an allow-listed pod label <name> as label_<name>.
KUBE_POD_LABEL_PREFIX = "label_"
# What NVIDIA's device plugin advertises per node (kube-state-metrics' capacity, the resource name sanitised):
# GPUs times the replicas where it time-slices or shares them through MPS. Read by doctor only.
NODE_CAPACITY_METRIC = "kube_node_status_capacity"
NODE_CAPACITY_RESOURCE_LABEL = "resource"
NVIDIA_GPU_RESOURCE = "nvidia_com_gpu"
# dcgm-exporter with KUBERNETES_VIRTUAL_GPUS: the device plugin's replica a pod holds, on each pod's series.
VGPU_LABEL = "vgpu"
# dcgm-exporter with KUBERNETES_ENABLE_DRA: the resource claim a pod holds the GPU through, on each of its series
DRA_CLAIM_LABEL = "dra_claim_name"

# node_exporter: host-level series are joined to executions through the node's name.
NODE_INFO_METRIC = "node_uname_info"
NODE_NAME_LABEL = "nodename"
NODE_TARGET_LABELS: tuple[str, ...] = TARGET_LABELS
