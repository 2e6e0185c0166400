"""paper_params: the CROCS paper's hyperparameters, checked against its text and tables.

Two checks that do not depend on each other: the values against literals
transcribed here from the paper (always run), and against the paper's LaTeX
source itself, where it is available (``CROCS_PAPER_TEX``, by default the
project's shared copy).
"""

import os
import re
from pathlib import Path

import pytest

from sklearn_crocs import CROCSClusterer, paper_params
from sklearn_crocs.nn import CNNEncoder, ResNet1dEncoder

PAPER_TEX = Path(os.environ.get("CROCS_PAPER_TEX", "/work/shared/paper/crocs-neurips2021.tex"))

# Kiyasseh, Zhu & Clifton, NeurIPS 2021, transcribed by hand.
SHARED = {
    "tau_s": 0.1,  # Sec. 5, "Hyperparameters": tau_s = 0.1
    "tau_w": 1.0,  # Sec. 5, "Hyperparameters": tau_w = 1
    "beta": 0.2,  # Sec. 5, "Hyperparameters": beta = 0.2
    "loss": "soft",  # Eq. 3: L_tot = L_NCE-soft + L_reg
    "reg_reduction": "sum",  # Eq. 3: L_reg = sum_{j,k} (d^_jk - d_jk)^2
    "prototypes": "learned",  # Sec. 5, "Baseline methods": CP CROCS
    "ordinal": None,  # Eq. 2's indicators and Eq. 3's Hamming distance: nominal
    "augment": None,  # Appendix A.1: whole 2500-sample frames, no augmentation named
    "lr_schedule": "constant",  # Table 6: Adam; no learning-rate schedule is named
    "ensemble_size": 1,  # one network
}
CHAPMAN = {
    **SHARED,
    "encoder": "cnn",  # Appendix B: Table 5 for every Chapman experiment
    "encoder_params": {  # Table 5
        "channels": (4, 16, 32),  # C_out of layers 1-3
        "kernel_size": 7,  # K
        "stride": 3,  # caption: "A stride of 3 was used for all convolutional layers"
        "pool_size": 2,  # MaxPool(2)
        "dropout": 0.1,  # Dropout(0.1)
        "output_relu": True,  # layer 4: Linear, ReLU
    },
    "embedding_dim": 128,  # Sec. 5, "Hyperparameters": E = 128 for Chapman
    "batch_size": 256,  # Table 6
    "lr": 1e-4,  # Table 6
    "working_rate": 250.0,  # Appendix A.1: downsampled to 250 Hz
}
PTBXL = {
    **SHARED,
    "encoder": "resnet",  # Appendix B: ResNet18 with one block per layer
    "encoder_params": {  # ResNet18's widths, stem kernel 7 and block kernel 3, in 1-D
        "channels": (64, 128, 256, 512),
        "stem_kernel_size": 7,
        "kernel_size": 3,
    },
    "embedding_dim": 256,  # Sec. 5, "Hyperparameters": E = 256 for PTB-XL
    "batch_size": 128,  # Table 6
    "lr": 1e-5,  # Table 6
    "working_rate": 500.0,  # Appendix A.1: 500 Hz, 5-s frames of 2500 samples
}


@pytest.mark.parametrize(("dataset", "expected"), [("chapman", CHAPMAN), ("ptbxl", PTBXL)])
def test_values_match_the_transcription(dataset, expected):
    params = paper_params(dataset)
    assert params == expected
    # Types too: 1 == 1.0 and (1, 2) != [1, 2] would hide a wrong literal.
    for name, value in expected.items():
        assert type(params[name]) is type(value), name


@pytest.mark.parametrize("dataset", ["chapman", "ptbxl"])
def test_every_value_is_a_valid_crocs_parameter(dataset):
    model = CROCSClusterer(**paper_params(dataset))
    model._validate_params()
    for name, value in paper_params(dataset).items():
        assert model.get_params()[name] == value


def test_each_call_returns_a_new_dict():
    params = paper_params("ptbxl")
    params["lr"] = 1.0
    params["encoder_params"]["channels"] = (8,)
    assert paper_params("ptbxl") == PTBXL


def test_unknown_dataset():
    with pytest.raises(ValueError, match="chapman.*ptbxl"):
        paper_params("PTB-XL")


def test_the_chapman_cnn_is_table_5():
    params = paper_params("chapman")
    # Table 5: one input channel (each lead an instance), Linear 320 x E.
    encoder = CNNEncoder(1, 2500, params["embedding_dim"], **params["encoder_params"])
    assert encoder.n_flat_features == 320
    assert encoder.head[1].out_features == 128
    convs = [m for m in encoder.reference_layers() if type(m).__name__ == "Conv1d"]
    assert [(c.in_channels, c.out_channels, c.kernel_size[0], c.stride[0]) for c in convs] == [
        (1, 4, 7, 3), (4, 16, 7, 3), (16, 32, 7, 3)]  # fmt: skip


def test_the_ptbxl_resnet_is_resnet18_with_one_block_per_stage():
    params = paper_params("ptbxl")
    encoder = ResNet1dEncoder(12, 2500, params["embedding_dim"], **params["encoder_params"])
    assert len(encoder.blocks) == 4  # ResNet18's four stages, one basic block each
    assert [block.conv1.out_channels for block in encoder.blocks] == [64, 128, 256, 512]
    assert encoder.head[-1].out_features == 256
    # "Reducing the number of parameters by a factor of two" (Appendix B): a
    # second block per stage would add about as many again.
    n_params = sum(p.numel() for p in encoder.parameters())
    second_blocks = sum(
        2 * c * c * 3 + 4 * c for c in (64, 128, 256, 512)
    )  # two 3-tap convolutions and two batch norms per extra block
    assert 0.8 < second_blocks / n_params < 1.2


# ---------------------------------------------------------------- the paper itself
@pytest.fixture(scope="module")
def tex():
    if not PAPER_TEX.is_file():
        pytest.skip(f"the paper's LaTeX source is not at {PAPER_TEX} (set CROCS_PAPER_TEX)")
    return PAPER_TEX.read_text(encoding="utf-8")


def paragraph(tex, title):
    start = tex.index(rf"\paragraph{{{title}}}")
    return tex[start : tex.index("\n", start)]


def table(tex, label):
    end = tex.index(rf"\label{{table:{label}}}")
    end = tex.index(r"\end{table}", end)
    return tex[tex.rindex(r"\begin{table}", 0, end) : end]


def test_hyperparameters_match_section_5(tex):
    text = paragraph(tex, "Hyperparameters")
    assert float(re.search(r"\\tau_\{s\}=([\d.]+)", text).group(1)) == SHARED["tau_s"]
    assert float(re.search(r"\\tau_\{w\}=([\d.]+)", text).group(1)) == SHARED["tau_w"]
    assert float(re.search(r"\\beta=([\d.]+)", text).group(1)) == SHARED["beta"]
    dims = re.search(r"embedding dimension \$E=(\d+)\$ and \$(\d+)\$ for Chapman and PTB-XL", text)
    assert (int(dims.group(1)), int(dims.group(2))) == (
        CHAPMAN["embedding_dim"], PTBXL["embedding_dim"])  # fmt: skip


def test_batch_sizes_and_learning_rates_match_table_6(tex):
    text = table(tex, "batchsize")
    assert "Adam" in text
    for name, expected in (("Chapman", CHAPMAN), ("PTB-XL", PTBXL)):
        row = re.search(rf"{name} & (\d+) & 10\\textsuperscript{{(-\d+)}}", text)
        assert int(row.group(1)) == expected["batch_size"], name
        assert 10.0 ** int(row.group(2)) == expected["lr"], name


def test_the_cnn_matches_table_5(tex):
    text = table(tex, "network_architecture")
    convs = re.findall(r"Conv 1D & (\d+) x (\d+) x (\d+)", text)
    assert [int(c_out) for _, _, c_out in convs] == list(CHAPMAN["encoder_params"]["channels"])
    assert {int(k) for k, _, _ in convs} == {CHAPMAN["encoder_params"]["kernel_size"]}
    assert int(convs[0][1]) == 1  # one input channel: each lead is an instance
    stride = re.search(r"A stride of (\d+) was used for all convolutional layers", text)
    assert int(stride.group(1)) == CHAPMAN["encoder_params"]["stride"]
    assert set(re.findall(r"MaxPool\((\d+)\)", text)) == {"2"}
    assert set(re.findall(r"Dropout\(([\d.]+)\)", text)) == {"0.1"}
    assert re.search(r"Linear&320 x \$E\$ \\\\\s*& ReLU", text)


def test_the_regulariser_is_a_sum_in_eq_3(tex):
    start = tex.index(r"\mathcal{L}_{reg} = ")
    assert tex[start:].startswith(r"\mathcal{L}_{reg} = \sum_{j,k=1}^{M}")
    assert r"\mathcal{L}_{tot} = \mathcal{L}_{NCE-soft} + \mathcal{L}_{reg}" in tex


def test_the_resnet_and_the_sampling_rates_match_the_appendix(tex):
    assert (
        "ResNet18 architecture whereby the number of blocks per layer was reduced from two to one"
        in tex
    )
    assert "We downsample the recording to 250Hz" in tex
    ptbxl = tex[tex.index(r"\textbf{PTB-XL} \cite{Wagner2020}. Each ECG") :]
    ptbxl = ptbxl[: ptbxl.index("\n")]
    assert "sampling rate of 500Hz" in ptbxl and "downsample" not in ptbxl
    assert CHAPMAN["working_rate"] == 250.0 and PTBXL["working_rate"] == 500.0
