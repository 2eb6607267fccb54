"""Ranking: hybrid search (the index's words fused with chunk vectors), embedders, the vector cache, the relevance gate."""
