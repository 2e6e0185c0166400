"""
=====================================
Raw recordings at another rate
=====================================

Recordings as a hospital exports them are sampled at 500 Hz (or 250, or
1000), in mV, with a DC offset, baseline wander and mains interference. This
example makes the PTB-XL records shipped with the package look like that,
cleans them with :class:`~sklearn_crocs.preprocessing.SignalConditioner`, and
trains a :class:`~sklearn_crocs.CROCSClusterer` that knows the rate of its
signals, so that it can be queried with recordings at another rate. See
:ref:`raw_recordings` for the contract and the benchmark over 5 splits.
"""

# %%
# Records made raw
# ----------------
# The bundled records are 10 s at 100 Hz, band-passed and z-scored. Upsampled
# to 500 Hz and given a gain, an offset, a slow wander and 50 Hz mains, they
# look like an export.

import matplotlib.pyplot as plt
import numpy as np

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ptbxl_sample
from sklearn_crocs.preprocessing import (
    SignalConditioner,
    make_frames,
    resample_signals,
)

sample = load_ptbxl_sample()
rng = np.random.default_rng(0)
records = resample_signals(sample.data, 100, 500)  # (500, 12, 5000)
t = np.arange(records.shape[-1]) / 500
phase = rng.uniform(0, 6, size=(len(records), 12, 1))
wander = 0.4 * np.sin(2 * np.pi * 0.2 * t + phase)
raw = 0.3 * records + rng.uniform(-1, 1, size=(len(records), 12, 1)) + wander
raw += 0.15 * np.sin(2 * np.pi * 50 * t)
raw = raw.astype(np.float32)

# %%
# Conditioning
# ------------
# A zero-phase band-pass (0.67-40 Hz) removes the offset and the wander, a
# notch the mains; the records are resampled to 100 Hz and each lead is
# z-scored. Whole records are filtered before they are cut into frames.

conditioner = SignalConditioner(sampling_rate=500, target_rate=100, notch=50)
clean = conditioner.fit_transform(raw)
print(f"raw {raw.shape} at 500 Hz -> conditioned {clean.shape} at 100 Hz")

fig, axes = plt.subplots(2, 1, figsize=(7, 4), sharex=True)
axes[0].plot(t[:2000], raw[0, 1, :2000], lw=0.6)
axes[0].set(ylabel="lead II (mV)", title="raw-like record, 500 Hz")
axes[1].plot(t[:2000:5], clean[0, 1, :400], lw=0.8, color="C1")
axes[1].set(xlabel="time (s)", ylabel="z-score", title="conditioned, 100 Hz")
fig.tight_layout()

# %%
# A model that knows its rate
# ---------------------------
# ``sampling_rate`` declares the rate of the signals given to ``fit``; the
# encoder runs at ``working_rate`` (100 Hz). The fitted model records the
# rate and the duration of its frames, and brings signals of another
# declared rate to it.

frames, attributes, groups = make_frames(
    clean, 500, attributes=sample.attributes[["class", "sex"]], groups=sample.groups
)
train = np.isin(groups, np.unique(groups)[:300])
model = CROCSClusterer(sampling_rate=100, max_epochs=10, random_state=0)
model.fit(frames[train], attributes[train], groups=groups[train])
print(f"model rate {model.sampling_rate_:g} Hz, frames of "
      f"{model.input_shape_[1] / model.sampling_rate_:g} s")  # fmt: skip

# The same held-out frames at 250 Hz, declared as such, get the same answers.
test = frames[~train]
at_250 = resample_signals(test, 100, 250)
answers = model.predict(at_250, sampling_rate=250) == model.predict(test)
same = answers.all(axis=1).mean()
print(f"same prediction at 100 and 250 Hz: {same:.1%} of {len(test)} frames")

# %%
# Undeclared, 250 Hz frames are 12.5 s long at 100 Hz: the model refuses
# them and says what to pass.
try:
    model.predict(at_250)
except ValueError as error:
    print(error)
