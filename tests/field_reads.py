"""A layout that notes which of its fields are read: what a cache keyed without a field must never read (the
dispatcher fields outside the MoE block, fast63's block times and fast64's shared step traffic). One recorder for
test_training_comm_keyed_fast63 and test_training_search_speed_fast64."""

from topo.training.parallel import ParallelLayout

READ: set = set()


class Recorded(ParallelLayout):
    """A :class:`ParallelLayout` that adds the name of every model field read of it (and of its copies:
    ``model_copy`` keeps the class) to :data:`READ`."""

    def __getattribute__(self, name):
        if name in ParallelLayout.model_fields:
            READ.add(name)
        return super().__getattribute__(name)
