"""How the services reach the world: the coordinator's REST API (`rest`), the job's object storage
(`storage`), and the bundle of Kubernetes, HTTP and event sink they are handed (`deps`). Observing reads
through them, acting writes through them; deciding never touches them."""
