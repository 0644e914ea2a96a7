"""Which base classes make a class an ``nn.Module``: torch.nn layers, Lightning, Hugging Face.

Pure data, no LibCST: the value model (:mod:`devlint.analysis.values`) and the project index
(:mod:`devlint.project`, which resolves base classes across files before anything is parsed)
both read it.
"""

from __future__ import annotations

from typing import Optional

NON_MODULE_NN = frozenset({"Parameter", "ParameterList", "ParameterDict", "Buffer", "init", "functional", "utils"})
# Base classes of other libraries that are nn.Module subclasses (a class deriving one is a Module).
MODULE_FAMILIES = frozenset({
    "torch.nn.Module", "torch.nn.modules.module.Module", "torch.nn.Sequential",
    "pytorch_lightning.LightningModule", "pytorch_lightning.core.LightningModule",
    "pytorch_lightning.core.module.LightningModule", "pytorch_lightning.core.lightning.LightningModule",
    "lightning.LightningModule", "lightning.pytorch.LightningModule",
    "lightning.pytorch.core.LightningModule", "lightning.pytorch.core.module.LightningModule",
    "transformers.PreTrainedModel", "transformers.modeling_utils.PreTrainedModel",
    "diffusers.ModelMixin", "diffusers.models.modeling_utils.ModelMixin",
})


def is_module_base(qualname: Optional[str]) -> bool:
    """A base class that makes its subclass an ``nn.Module`` (torch.nn layers, Lightning, ...)."""
    if qualname is None:
        return False
    if qualname in MODULE_FAMILIES:
        return True
    last = qualname.rsplit(".", 1)[-1]
    return qualname.startswith("torch.nn.") and last[:1].isupper() and last not in NON_MODULE_NN
