"""Pictures of a scene: the image renderer, the viewer's frame geometry and the GGUI viewer."""
