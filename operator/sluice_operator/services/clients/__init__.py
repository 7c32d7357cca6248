"""How the services reach what is not Kubernetes: the coordinator's REST API (`rest`) and the job's
object storage (`storage`)."""
