"""subagents.cluster: the same runtime on a Ray cluster (``pip install 'subagents[ray]'``).

Why a package of its own: Ray is an optional extra (a ~285 MB install), so nothing outside
this package imports it, and nothing here imports it at module level either; every module
that needs Ray asks ``connect.import_ray()`` inside the function that needs it. The pure
parts (placement, membership) import no Ray at all and are tested without a cluster.

What lives where (see docs/cluster.md):

- ``connect``: finding and joining a cluster (``cluster="auto" | address``,
  ``SUBAGENTS_RAY_ADDRESS``), the namespace and names of this runtime's Ray actors;
- ``store_service`` / ``head`` / ``remote_store``: the one SQLite store of a cluster,
  served by one Ray actor on the head node (nodes never open the file), and the ``RunStore``
  every other process (a node, the CLI, the driver) reaches it through;
- ``membership``: which nodes host runs, and which of them are alive;
- ``placement``: on which node a run goes (its parent's, else the least loaded; a
  definition may require a Ray custom resource);
- ``backend``: ``RayBackend``, all the runtime asks of this package (join, the store, the
  node hosts), meeting ``runtime/_cluster_backend.py``'s protocol: nothing here imports the
  runtime above it (``tests/test_import_graph.py``). Trees that outlive the program that
  started them (``start_detached``) are built on the Runtime: ``runtime/_detached_trees.py``.
"""
