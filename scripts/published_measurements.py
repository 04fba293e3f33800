"""Shared by the converters of published kernel tables into moesim measurement files
(scripts/deepep_to_measurements.py, deepgemm_to_measurements.py, flashmla_to_measurements.py;
docs/schemas/measurement.md)."""
import json


def header(device, engine_version):
    """The measurement file's header record for a published table (no engine, no peaks)."""
    return {"record": "header", "schema": "moesim.measurements.v1", "mode": "bench",
            "backend": "published", "device": device,
            "peaks": {"bf16_flops_per_s": None, "fp8_flops_per_s": None,
                      "fp32_flops_per_s": None, "memory_bytes_per_s": None},
            "engine_version": engine_version, "seed": 1}


def write_jsonl(path, records):
    """One JSON object per line."""
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
