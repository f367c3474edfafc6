import FrameBus
