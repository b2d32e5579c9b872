"""perfscout.analysis"""
