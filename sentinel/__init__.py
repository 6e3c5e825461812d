"""sentinel: training-stability toolkit for PyTorch and Lightning.

Record gradient norms, AMP loss scale, NaN/Inf sources and attention entropy; detect loss
spikes and divergence online; roll back to a good snapshot and skip the bad batches; explain
a run afterwards with ``sentinel analyze``.
"""

__version__ = "0.1.0"
