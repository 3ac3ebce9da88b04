"""The PySpark placement job: computes balanced placements and emits PartitionReassignments."""
