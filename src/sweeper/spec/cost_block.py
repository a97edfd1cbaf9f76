"""`cost:`: prices that turn the cost ledger's resource-hours into money."""

from __future__ import annotations

from pydantic import (
    Field,
    model_validator,
)

from sweeper.spec.strict import Strict


class CostConfig(Strict):
    """Prices per resource-hour. Every trial's ledger records CPU- and GPU-seconds held
    (the `resources:` it reserved × the wall time of each attempt, lost attempts
    included) whether or not this block is set; with it, the summary also prints
    their price per group, per sweep and per undecided comparison's estimate."""

    gpu_hour: float = Field(0.0, ge=0)
    """Price of one GPU held for one hour (a fraction of a GPU is charged pro rata)."""
    cpu_hour: float = Field(0.0, ge=0)
    """Price of one CPU held for one hour."""
    currency: str = Field("USD", min_length=1, max_length=8, pattern=r"^\S+$")
    """The prices' currency, as the summary prints it (a code such as `USD`, `EUR`)."""

    @model_validator(mode="after")
    def _some_price(self) -> CostConfig:
        if self.gpu_hour == 0 and self.cpu_hour == 0:
            raise ValueError("give gpu_hour or cpu_hour (a price per resource-hour), or drop cost:")
        return self

    def price(self, cpu_seconds: float, gpu_seconds: float) -> float:
        """What `cpu_seconds` CPU-seconds and `gpu_seconds` GPU-seconds held cost."""
        return (cpu_seconds * self.cpu_hour + gpu_seconds * self.gpu_hour) / 3600.0
