"""Records what ComfyUI's own code answers for the test-data generators: runs
tests/data/make_models.py and make_merge_cases.py into a scratch folder with every question they
ask of ComfyUI (tests/data/comfy_answers.py) put to the real functions of the ComfyUI checkout
on sys.path (tests/data/comfy_live.py), and writes the answers to tests/fixtures/comfy_answers/
(the merge results ComfyUI computes as a safetensors file, the rest as JSON).

usage: record_comfy_answers.py [OUTDIR]    (run by record_comfy_answers.sh, from ComfyUI's
                                           folder with its python; OUTDIR defaults to the fixtures)
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import comfy_answers  # noqa: E402
import comfy_live  # noqa: E402


def as_torch(value):
    """A generator's tensor (NumPy array, or make_models' BF16 bits) as a torch tensor."""
    torch = comfy_live.torch
    bits = getattr(value, "bits", None)
    if bits is not None:
        return torch.from_numpy(bits.view("int16").copy()).view(torch.bfloat16)
    return torch.from_numpy(value.copy())


class Live:
    """comfy_answers' questions, put to ComfyUI's real functions."""

    def lora_loader(self, model, lora):
        return comfy_live.lora_loader(comfy_live.stand_in_models(model),
                                      {k: as_torch(v) for k, v in lora.items()})

    def flux_to_diffusers(self, config):
        return comfy_live.flux_to_diffusers(config)

    def calculate_weight(self, base, lora, calls):
        torch = comfy_live.torch
        dtypes = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64}
        # The stored values are exact in their dtype: the tensors ComfyUI loads from the files.
        as_file = lambda ts: {n: torch.from_numpy(v.copy()).to(dtypes[d]) for n, (d, v) in ts.items()}
        out = comfy_live.calculate_weight(as_file(base), as_file(lora), calls)
        return {k: v.numpy() for k, v in out.items()}


def main(outdir):
    comfy_live.start()
    import make_merge_cases
    import make_models
    comfy_answers.live = Live()
    with tempfile.TemporaryDirectory() as tmp:
        make_models.main(os.path.join(tmp, "models"))
        make_merge_cases.main(os.path.join(tmp, "merge"))
    os.makedirs(outdir, exist_ok=True)
    version = comfy_live.version()
    for kind, file in comfy_answers.FILES.items():
        doc = {"comfyui": version, "recorded_by": "tests/data/record_comfy_answers.sh",
               "answers": dict(sorted(comfy_answers.recorded[kind].items()))}
        with open(os.path.join(outdir, file), "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"{os.path.join(outdir, file)}: {len(doc['answers'])} answers of ComfyUI {version}")
    for kind, file in comfy_answers.TENSOR_FILES.items():
        answers = comfy_answers.recorded[kind]
        comfy_answers.write_tensor_answers(os.path.join(outdir, file), answers,
                                           {"comfyui": version, "recorded_by": "tests/data/record_comfy_answers.sh"})
        print(f"{os.path.join(outdir, file)}: {len(answers)} answers of ComfyUI {version}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else comfy_answers.FIXTURES)
